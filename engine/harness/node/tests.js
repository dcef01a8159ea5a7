// The assert tests' own process (Node's standard library only): trusted test code, from the data
// set, runs here and calls the program, which runs in a process of its own (program.js), across
// the process boundary with plain values. The expected answers live only here.
//
// The harness starts this process from a copy of Node that its user may execute but not read, so
// the kernel makes it not dumpable: the program, though it may run as the same user, can neither
// read nor write its memory, nor open its descriptors. It can only kill it or stop it, and either
// leaves the test without a report, which the harness counts as the program's failure.
//
//   node tests.js   fd 3: the channel to the program's process; fd 4: the harness's channel,
//   first the request {"op": "test", "code", "prelude", "entry"}, then the report
//   {"op": "done", "status", "error"} back
"use strict";

const assert = require("node:assert");
const vm = require("node:vm");
const wire = require("./wire.js");

const PROGRAM_FD = 3;
const HARNESS_FD = 4;
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
// The program's errors that test code may expect by class; any other arrives as an Error.
const REBUILT_ERRORS = { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };

// What went wrong on the program's side of a call (it died, or broke the protocol): it fails
// the test whatever the test code does with the exception.
class ProgramFault extends Error {}

let programFault = null;
const remoteErrors = new WeakMap();

function fault(message) {
  programFault = programFault || new ProgramFault(message);
  return programFault;
}

function remoteError(error) {
  const reported = error && typeof error === "object" ? error : {};
  const type = String(reported.type);
  const ErrorClass = Object.prototype.hasOwnProperty.call(REBUILT_ERRORS, type) ? REBUILT_ERRORS[type] : Error;
  const rebuilt = new ErrorClass(String(reported.message ?? ""));
  remoteErrors.set(rebuilt, { type, message: String(reported.message ?? ""), traceback: String(reported.traceback ?? "") });
  return rebuilt;
}

// Stands for the program's function `name` in the test code.
function remote(name) {
  const stand = function (...args) {
    if (programFault) throw programFault;
    let encoded;
    try {
      encoded = wire.encode(args);
    } catch (error) {
      throw new TypeError(`cannot pass this argument to the program: ${error.message}`);
    }
    let reply;
    try {
      wire.writeFrame(PROGRAM_FD, { op: "call", name, args: encoded });
      reply = wire.readFrame(PROGRAM_FD);
    } catch (error) {
      throw fault(`the program broke the harness protocol: ${error.message}`);
    }
    if (reply === null) throw fault("the program's process ended unexpectedly");
    if (reply.op !== "reply") throw fault("the program broke the harness protocol: expected reply");
    if (!reply.ok) throw remoteError(reply.error);
    try {
      return wire.decode(reply.value);
    } catch (error) {
      throw fault(`the program broke the harness protocol: ${error.message}`);
    }
  };
  Object.defineProperty(stand, "name", { value: name });
  return stand;
}

function isAssertion(error) {
  return error instanceof assert.AssertionError || (error instanceof Error && error.code === "ERR_ASSERTION" && !remoteErrors.has(error));
}

function failedLine(error, code) {
  const found = /<test>:(\d+)/.exec(String(error.stack || ""));
  const line = found && code.split("\n")[Number(found[1]) - 1];
  return line ? `failed: ${line.trim()}` : "";
}

function run(request, loaded) {
  // The program's names come last: the test code's own declarations and the builtins win.
  const names = [...(Array.isArray(loaded.globals) ? loaded.globals : []), request.entry];
  for (const name of names) {
    if (typeof name === "string" && IDENTIFIER.test(name) && !(name in globalThis)) globalThis[name] = remote(name);
  }
  if (request.entry) globalThis.candidate = remote(request.entry);
  globalThis.require = require;
  const code = String(request.code);
  try {
    if (request.prelude) vm.runInThisContext(String(request.prelude), { filename: "<prelude>" });
    vm.runInThisContext(code, { filename: "<test>" });
  } catch (error) {
    if (programFault) return { status: "runtime_error", error: wire.describe(programFault) };
    if (remoteErrors.has(error)) return { status: "runtime_error", error: remoteErrors.get(error) };
    const described = wire.describe(error);
    if (!isAssertion(error)) return { status: "runtime_error", error: described };
    return { status: "assertion_failed", error: { ...described, message: described.message || failedLine(error, code) } };
  }
  if (programFault) return { status: "runtime_error", error: wire.describe(programFault) };
  return { status: "ok", error: null };
}

function main() {
  const request = wire.readFrame(HARNESS_FD);
  let loaded;
  try {
    loaded = wire.readFrame(PROGRAM_FD);
  } catch (error) {
    loaded = { ok: false, stage: "protocol", error: { type: "WorkerLost", message: error.message, traceback: "" } };
  }
  let report;
  if (loaded === null || loaded.op !== "loaded") {
    const message = "the program's process ended before it loaded the program";
    report = { status: "runtime_error", error: { type: "WorkerLost", message, traceback: "" } };
  } else if (!loaded.ok) {
    report = { status: loaded.stage === "compile" ? "compile_error" : "runtime_error", error: loaded.error };
  } else {
    report = run(request, loaded);
  }
  wire.writeFrame(HARNESS_FD, { op: "done", ...report });
}

main();
process.exit(0);
