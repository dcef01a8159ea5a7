// The program's process for call and assert tests of a JavaScript program (Node's standard
// library only). It runs as the program and nothing it says is trusted: it loads the program as
// a script, so that its top-level functions can be named, and then calls them with plain values
// and answers with plain values. Trusted code (the harness, the assert tests' own process) reads
// the answers and judges them.
//
//   node program.js SOURCE   fd 3: the request (a frame); fd 4: the channel for answers
//   request {"op": "call", "entry": NAME, "args": [...]}: one call, one "result" frame
//   request {"op": "serve"}: a "loaded" frame naming the program's functions, then a "reply" for
//   every {"op": "call", "name", "args"} frame until the channel closes
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const vm = require("node:vm");
const { createRequire } = require("node:module");
const wire = require("./wire.js");

const REQUEST_FD = 3;
const CHANNEL_FD = 4;
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const DECLARATION = /^\s*(?:const|let|var|class|(?:async\s+)?function\s*\*?)\s*([A-Za-z_$][\w$]*)/gm;

// Loads the program the way `node SOURCE` would run it, but as a script of the global scope: its
// top-level declarations (let and const included) are names that later scripts can see.
function load(source) {
  const code = fs.readFileSync(source, "utf8").replace(/^#!.*/, "");
  const programModule = { exports: {}, filename: source, id: ".", loaded: false };
  Object.assign(globalThis, {
    require: createRequire(source),
    module: programModule,
    exports: programModule.exports,
    __filename: source,
    __dirname: path.dirname(source),
  });
  let script;
  try {
    script = new vm.Script(code, { filename: source });
  } catch (error) {
    return { ok: false, stage: "compile", error: wire.describe(error) };
  }
  const before = new Set(Object.getOwnPropertyNames(globalThis));
  try {
    script.runInThisContext();
  } catch (error) {
    return { ok: false, stage: "run", error: wire.describe(error) };
  }
  // Top-level let, const and class bindings are no properties of the global object: the names
  // declared at the start of a line are the candidates, kept if they name a function there.
  const declared = Array.from(code.matchAll(DECLARATION), (found) => found[1]);
  const added = Object.getOwnPropertyNames(globalThis).filter((name) => !before.has(name));
  const names = [...new Set([...added, ...declared])].filter((name) => lookup(name, programModule) !== undefined);
  return { ok: true, globals: names, exports: programModule };
}

// The program's function called `name`: a top-level binding, else an export of that name.
function lookup(name, programModule) {
  if (!IDENTIFIER.test(name)) return undefined;
  let found;
  try {
    found = vm.runInThisContext(`typeof ${name} === "undefined" ? undefined : ${name}`);
  } catch {
    found = undefined;
  }
  if (typeof found !== "function") {
    const exported = programModule.exports;
    found = typeof exported === "function" && exported.name === name ? exported : exported && exported[name];
  }
  return typeof found === "function" ? found : undefined;
}

async function call(fn, args) {
  let value;
  try {
    value = await fn(...args);
  } catch (error) {
    return { ok: false, error: wire.describe(error) };
  }
  try {
    return { ok: true, value: wire.encode(value) };
  } catch (error) {
    return { ok: false, error: { type: "UnjudgeableValue", message: `the returned value cannot be judged: ${error.message}`, traceback: "" } };
  }
}

function missing(name) {
  return { type: "NameError", message: `the program defines no function ${JSON.stringify(name)}`, traceback: "" };
}

async function main() {
  const request = wire.readFrame(REQUEST_FD);
  const loaded = load(process.argv[2]);
  if (request.op === "call") {
    if (!loaded.ok) return wire.writeFrame(CHANNEL_FD, { op: "result", ...loaded });
    const fn = lookup(request.entry, loaded.exports);
    if (fn === undefined) return wire.writeFrame(CHANNEL_FD, { op: "result", ok: false, stage: "entry", error: missing(request.entry) });
    const result = await call(fn, wire.decode(request.args));
    return wire.writeFrame(CHANNEL_FD, { op: "result", ...result });
  }
  wire.writeFrame(CHANNEL_FD, { op: "loaded", ok: loaded.ok, stage: loaded.stage, error: loaded.error, globals: loaded.globals });
  if (!loaded.ok) return undefined;
  for (let message = wire.readFrame(CHANNEL_FD); message !== null; message = wire.readFrame(CHANNEL_FD)) {
    const fn = lookup(String(message.name), loaded.exports);
    const result = fn === undefined ? { ok: false, error: missing(message.name) } : await call(fn, wire.decode(message.args));
    wire.writeFrame(CHANNEL_FD, { op: "reply", ...result });
  }
  return undefined;
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error.stack || error}\n`);
    process.exit(70);
  },
);
