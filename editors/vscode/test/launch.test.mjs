// The activation logic of the VS Code extension, without VS Code: command discovery,
// settings, document selector, and the real `clawkb lsp` started from the plan.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const launch = require("../out/launch.js");
const rpc = require("vscode-jsonrpc/node");

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..", "..");

test("settings: strings trimmed, wrong types dropped", () => {
  const values = { command: "  ~/bin/clawkb ", kb: 3, languages: ["c", 7, "", "python"] };
  assert.deepEqual(launch.readSettings((k) => values[k]), {
    command: "~/bin/clawkb",
    kb: "",
    languages: ["c", "python"],
  });
});

test("command: setting, then PATH, then the workspace .venv", () => {
  const files = new Set(["/usr/bin/clawkb", "/ws/.venv/bin/clawkb", "/home/me/bin/clawkb"]);
  const exists = (f) => files.has(f);
  const env = { PATH: "/nope:/usr/bin", HOME: "/home/me" };
  const s = { command: "", kb: "", languages: [] };
  assert.equal(launch.findCommand(s, ["/ws"], env, exists, "linux"), "/usr/bin/clawkb");
  assert.equal(launch.findCommand(s, ["/ws"], { PATH: "/nope" }, exists, "linux"), "/ws/.venv/bin/clawkb");
  assert.equal(launch.findCommand({ ...s, command: "~/bin/clawkb" }, ["/ws"], env, exists, "linux"), "/home/me/bin/clawkb");
  assert.equal(launch.findCommand({ ...s, command: ".venv/bin/clawkb" }, ["/ws"], env, exists, "linux"), "/ws/.venv/bin/clawkb");
  assert.equal(launch.findCommand({ ...s, command: "/missing/clawkb" }, ["/ws"], env, exists, "linux"), null);
  assert.equal(launch.findCommand(s, [], { PATH: "" }, exists, "linux"), null);
});

test("plan: --kb from the setting, selector from languages, a clear error when nothing is found", () => {
  const exists = (f) => f === "/usr/bin/clawkb";
  const env = { PATH: "/usr/bin", HOME: "/home/me" };
  const p = launch.plan({ command: "", kb: "~/notes/.clawkb", languages: ["c"] }, ["/ws"], env, exists, "linux");
  assert.equal(p.ok, true);
  assert.deepEqual(p.server, { command: "/usr/bin/clawkb", args: ["--kb", "/home/me/notes/.clawkb", "lsp"], cwd: "/ws" });
  assert.deepEqual(p.selector, [
    { scheme: "file", language: "c" },
    { scheme: "untitled", language: "c" },
  ]);
  assert.deepEqual(launch.plan({ command: "", kb: "", languages: [] }, [], env, exists, "linux").selector, [
    { scheme: "file" },
    { scheme: "untitled" },
  ]);
  const bad = launch.plan({ command: "", kb: "", languages: [] }, ["/ws"], { PATH: "" }, exists, "linux");
  assert.equal(bad.ok, false);
  assert.match(bad.error, /cannot find `clawkb`.*set clawkb\.command/);
});

// The plan made for this checkout (no PATH: the workspace .venv fallback) starts a real
// server that answers a hover with the examples' DDR passage.
const found = launch.plan({ command: process.env.TEST_CLAWKB_BIN ?? "", kb: "", languages: [] }, [REPO], { PATH: "" });
test("the planned command serves hover over stdio", { skip: !found.ok && "no clawkb in .venv/bin (run make venv)", timeout: 120000 }, async () => {
  const tmp = mkdtempSync(path.join(tmpdir(), "clawkb-vscode-"));
  try {
    const kb = path.join(tmp, ".clawkb");
    execFileSync(found.server.command, ["--kb", kb, "index", "-q", path.join(REPO, "examples", "notes")], { stdio: ["ignore", "ignore", "inherit"] });
    const p = launch.plan({ command: found.server.command, kb, languages: [] }, [tmp], { PATH: "" });
    assert.equal(p.ok, true);
    const proc = spawn(p.server.command, p.server.args, { cwd: p.server.cwd, stdio: ["pipe", "pipe", "inherit"] });
    const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
    conn.onRequest("window/showDocument", () => ({ success: true }));
    conn.onNotification("window/showMessage", () => {});
    conn.onNotification("window/logMessage", () => {});
    conn.listen();
    const init = await conn.sendRequest("initialize", { processId: process.pid, rootUri: pathToFileURL(tmp).href, capabilities: {} });
    assert.ok(init.capabilities.hoverProvider);
    await conn.sendNotification("initialized", {});
    const uri = pathToFileURL(path.join(tmp, "board.c")).href;
    const text = "int x;\n// differential trace impedance for DDR4 clocks\nint y;\n";
    await conn.sendNotification("textDocument/didOpen", { textDocument: { uri, languageId: "c", version: 1, text } });
    const hover = await conn.sendRequest("textDocument/hover", { textDocument: { uri }, position: { line: 1, character: 8 } });
    assert.equal(hover.contents.kind, "markdown");
    assert.match(hover.contents.value.split("---")[0], /ddr-layout\.md:\d+/);
    await conn.sendRequest("shutdown");
    await conn.sendNotification("exit");
    const code = await new Promise((resolve) => proc.on("exit", resolve));
    assert.equal(code, 0);
    conn.dispose();
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
