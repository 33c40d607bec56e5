// Start a real `clawkb serve` on a free loopback port over a temp vault holding
// examples/notes, with a token; stop it afterwards.
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..", "..");
export const TOKEN = "obsidian-test-token";

export function clawkbBin() {
  const given = process.env.TEST_CLAWKB_BIN;
  if (given) return given;
  const venv = path.join(REPO, ".venv", "bin", "clawkb");
  return existsSync(venv) ? venv : null;
}

export async function startServer() {
  const bin = clawkbBin();
  const tmp = mkdtempSync(path.join(tmpdir(), "clawkb-obsidian-"));
  const vault = path.join(tmp, "vault");
  cpSync(path.join(REPO, "examples", "notes"), vault, { recursive: true });
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CLAWKB_")));
  const proc = spawn(bin, ["--kb", path.join(tmp, "kb"), "serve", vault, "--port", "0", "--token", TOKEN], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = [];
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("clawkb serve printed no URL:\n" + log.join(""))), 90000);
    const look = (chunk) => {
      log.push(chunk.toString());
      const m = /Serving on (http:\/\/\S+)/.exec(log.join(""));
      if (m) {
        clearTimeout(timer);
        resolve(m[1].replace(/\/+$/, ""));
      }
    };
    proc.stdout.on("data", look);
    proc.stderr.on("data", look);
    proc.on("exit", (code) => reject(new Error(`clawkb serve exited (${code}):\n` + log.join(""))));
  });
  return {
    url,
    vault,
    log,
    async stop() {
      proc.kill("SIGTERM");
      await new Promise((resolve) => {
        if (proc.exitCode !== null) resolve();
        proc.on("exit", resolve);
        setTimeout(() => {
          proc.kill("SIGKILL");
          resolve();
        }, 15000);
      });
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
