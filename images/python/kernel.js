// A JavaScript or TypeScript code-interpreter context, driven by kernel.py (its parent): one JSON
// request per line on stdin ({"code", "env_vars"}); for each, what the cell's value is and the
// error it threw, then {"type": "done"}, as JSON lines on the descriptor named by argv[3]. What
// the cell prints goes to fds 1 and 2, which kernel.py forwards. State persists from cell to
// cell: every cell runs as a script in this one global scope.
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");
const util = require("util");
const vm = require("vm");
const { createRequire } = require("module");

const [language, reportFd] = [process.argv[2], Number(process.argv[3])];
const typescript = language === "typescript" ? require("typescript") : null;

function report(message) {
  fs.writeSync(reportFd, JSON.stringify(message) + "\n");
}

// What a script in a file would have: require relative to the working directory, module, exports.
globalThis.require = createRequire(path.join(process.cwd(), "cell.js"));
globalThis.module = { exports: {} };
globalThis.exports = globalThis.module.exports;

function compiled(code) {
  if (typescript === null) return code;
  // Checked for syntax, not for types, as the TypeScript programs of judged submissions are.
  const output = typescript.transpileModule(code, {
    compilerOptions: { target: typescript.ScriptTarget.ES2020, module: typescript.ModuleKind.CommonJS },
    reportDiagnostics: true,
  });
  const errors = (output.diagnostics || []).filter((d) => d.category === typescript.DiagnosticCategory.Error);
  if (errors.length > 0) {
    const error = new SyntaxError(typescript.flattenDiagnosticMessageText(errors[0].messageText, "\n"));
    error.name = "TypeScriptError";
    throw error;
  }
  return output.outputText;
}

// A stack without this kernel's frames: the cell's own are what the user wrote.
function cellFrames(stack) {
  return stack
    .split("\n")
    .filter((line) => !line.includes(__filename) && !/\(node:(vm|internal)/.test(line))
    .join("\n");
}

async function run(request) {
  const saved = { ...process.env };
  Object.assign(process.env, request.env_vars || {});
  try {
    // An interrupt (the cell's time is up) stops the script here instead of ending the context.
    let value = vm.runInThisContext(compiled(request.code || ""), { filename: "cell", breakOnSigint: true });
    if (value instanceof Promise) value = await value;
    if (value !== undefined) {
      report({ type: "result", is_main_result: true, data: { "text/plain": util.inspect(value) } });
    }
  } catch (error) {
    const isError = error instanceof Error;
    report({
      type: "error",
      name: isError ? error.name : "Error",
      value: isError ? error.message : util.inspect(error),
      traceback: isError && error.stack ? cellFrames(error.stack) : String(error),
    });
  } finally {
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
  }
}

// Between cells an interrupt has nothing to stop.
process.on("SIGINT", () => {});
const lines = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
lines.on("line", (line) => {
  queue = queue.then(async () => {
    let request;
    try {
      request = JSON.parse(line);
    } catch (error) {
      report({ type: "error", name: "ProtocolError", value: String(error), traceback: "" });
    }
    if (request !== undefined) await run(request);
    report({ type: "done" });
  });
});
lines.on("close", () => queue.then(() => process.exit(0)));
report({ type: "ready" });
