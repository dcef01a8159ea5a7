// Compiles one TypeScript file to JavaScript, as judges that run TypeScript on Node do: the
// syntax is checked, the types are not (the image holds no type declarations for Node's API).
// Exits 1 with the compiler's diagnostics when the source does not parse.
"use strict";
const fs = require("fs");
const ts = require("typescript");

const [source, output] = process.argv.slice(2);
const result = ts.transpileModule(fs.readFileSync(source, "utf8"), {
  compilerOptions: { target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS },
  fileName: source,
  reportDiagnostics: true,
});
const errors = (result.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
if (errors.length > 0) {
  const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => "", getNewLine: () => "\n" };
  process.stderr.write(ts.formatDiagnostics(errors, host));
  process.exit(1);
}
fs.writeFileSync(output, result.outputText);
