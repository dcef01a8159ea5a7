// Frames and typed values between the harness's Node processes and the harness (Node's standard
// library only). A frame is a 4-byte big-endian length and that many bytes of JSON, as the
// harness's channel writes them; values use the tags of the harness's codec (codec.py), so the
// host reads a JavaScript program's return value exactly as it reads a Python one.
"use strict";

const fs = require("node:fs");

const MAX_FRAME_BYTES = 64 * 1024 * 1024;
const MAX_DEPTH = 100;
const HEADER_BYTES = 4;

class WireError extends Error {}

function readExactly(fd, length) {
  const buffer = Buffer.alloc(length);
  let filled = 0;
  while (filled < length) {
    let read;
    try {
      read = fs.readSync(fd, buffer, filled, length - filled, null);
    } catch (error) {
      if (error.code === "EAGAIN" || error.code === "EINTR") continue;
      throw error;
    }
    if (read === 0) return null;
    filled += read;
  }
  return buffer;
}

// The next frame on `fd` (blocking), or null when the peer closed it.
function readFrame(fd) {
  const header = readExactly(fd, HEADER_BYTES);
  if (header === null) return null;
  const length = header.readUInt32BE(0);
  if (length > MAX_FRAME_BYTES) throw new WireError(`a frame of ${length} bytes exceeds ${MAX_FRAME_BYTES}`);
  const body = readExactly(fd, length);
  if (body === null) throw new WireError("the channel closed inside a frame");
  const message = JSON.parse(body.toString("utf8"));
  if (message === null || typeof message !== "object" || Array.isArray(message)) {
    throw new WireError("a frame must hold an object");
  }
  return message;
}

function writeFrame(fd, message) {
  const body = Buffer.from(JSON.stringify(message), "utf8");
  if (body.length > MAX_FRAME_BYTES) throw new WireError(`a frame of ${body.length} bytes exceeds ${MAX_FRAME_BYTES}`);
  const data = Buffer.alloc(HEADER_BYTES + body.length);
  data.writeUInt32BE(body.length, 0);
  body.copy(data, HEADER_BYTES);
  let sent = 0;
  while (sent < data.length) {
    try {
      sent += fs.writeSync(fd, data, sent, data.length - sent);
    } catch (error) {
      if (error.code !== "EAGAIN" && error.code !== "EINTR") throw error;
    }
  }
}

class CodecError extends Error {}

function encodeNumber(value) {
  if (Number.isNaN(value)) return { $float: "nan" };
  if (!Number.isFinite(value)) return { $float: value > 0 ? "inf" : "-inf" };
  // JSON cannot tell 2 from 2.0; JavaScript cannot either. -0 is written 0, as JSON does.
  return value;
}

function encodeBigInt(value) {
  if (value >= -(2n ** 53n) && value <= 2n ** 53n) return Number(value);
  return { $int: (value < 0n ? "-0x" : "0x") + (value < 0n ? -value : value).toString(16) };
}

// `value` as the codec's tagged JSON; a CodecError names what cannot be judged.
function encode(value, depth = 0) {
  if (depth > MAX_DEPTH) throw new CodecError("value is nested too deeply");
  const next = depth + 1;
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case "boolean":
    case "string":
      return value;
    case "number":
      return encodeNumber(value);
    case "bigint":
      return encodeBigInt(value);
    case "object":
      break;
    default:
      throw new CodecError(`cannot encode a value of type ${typeof value}`);
  }
  if (Array.isArray(value)) return Array.from(value, (item) => encode(item, next));
  if (Buffer.isBuffer(value)) return { $bytes: value.toString("base64") };
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    return Array.from(value, (item) => encode(item, next));
  }
  if (value instanceof Map) return { $dict: Array.from(value, ([k, v]) => [encode(k, next), encode(v, next)]) };
  if (value instanceof Set) {
    const items = Array.from(value, (item) => encode(item, next));
    items.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
    return { $set: items };
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    const name = (value.constructor && value.constructor.name) || "object";
    throw new CodecError(`cannot encode a value of type ${name}`);
  }
  return { $dict: Object.keys(value).map((key) => [key, encode(value[key], next)]) };
}

// A plain object whose keys are data: "__proto__" becomes an own property, never the prototype.
function plainObject(pairs) {
  const object = {};
  for (const [key, value] of pairs) {
    Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return object;
}

function decodeFloat(tag) {
  if (tag === "nan") return NaN;
  if (tag === "inf") return Infinity;
  if (tag === "-inf") return -Infinity;
  throw new CodecError(`bad $float tag ${JSON.stringify(tag)}`);
}

function decodeInt(tag) {
  if (typeof tag !== "string" || !/^-?0x[0-9a-f]+$/.test(tag)) throw new CodecError("bad $int tag");
  const negative = tag.startsWith("-");
  const magnitude = BigInt(negative ? tag.slice(1) : tag);
  return negative ? -magnitude : magnitude;
}

function decodeList(body, next, tag) {
  if (!Array.isArray(body)) throw new CodecError(`${tag} needs a list`);
  return body.map((item) => decode(item, next));
}

// Rebuild a value from the codec's tagged JSON: plain JavaScript data, nothing that can act.
// Integers beyond the safe range arrive as BigInt; tuples as arrays; dicts as plain objects when
// every key is a string, else as a Map; sets as Set; bytes as Buffer.
function decode(data, depth = 0) {
  if (depth > MAX_DEPTH) throw new CodecError("value is nested too deeply");
  const next = depth + 1;
  if (data === null || typeof data === "boolean" || typeof data === "string") return data;
  if (typeof data === "number") {
    return Number.isInteger(data) && !Number.isSafeInteger(data) ? BigInt(data) : data;
  }
  if (Array.isArray(data)) return data.map((item) => decode(item, next));
  if (typeof data !== "object") throw new CodecError(`unexpected ${typeof data} in an encoded value`);
  if (Object.prototype.hasOwnProperty.call(data, "$type")) return decode(data.value, next);
  const keys = Object.keys(data);
  if (keys.length !== 1) throw new CodecError("an encoded tag has exactly one key");
  const tag = keys[0];
  const body = data[tag];
  switch (tag) {
    case "$float":
      return decodeFloat(body);
    case "$int":
      return decodeInt(body);
    case "$bytes":
      if (typeof body !== "string") throw new CodecError("bad $bytes tag");
      return Buffer.from(body, "base64");
    case "$tuple":
      return decodeList(body, next, tag);
    case "$set":
    case "$frozenset":
      return new Set(decodeList(body, next, tag));
    case "$dict": {
      const pairs = decodeList(body, next, tag);
      if (!pairs.every((pair) => Array.isArray(pair) && pair.length === 2)) {
        throw new CodecError("$dict needs [key, value] pairs");
      }
      return pairs.every(([key]) => typeof key === "string") ? plainObject(pairs) : new Map(pairs);
    }
    default:
      throw new CodecError(`unknown tag ${JSON.stringify(tag)}`);
  }
}

// An error as the harness reports one: its type, message and stack.
function describe(error) {
  if (error instanceof Error) {
    return { type: String(error.name || "Error"), message: String(error.message), traceback: String(error.stack || "") };
  }
  let shown;
  try {
    shown = String(error);
  } catch {
    shown = "a value that cannot be shown";
  }
  return { type: "Error", message: `a non-Error value was thrown: ${shown}`, traceback: "" };
}

module.exports = { CodecError, WireError, decode, describe, encode, readFrame, writeFrame };
