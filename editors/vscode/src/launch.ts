/**
 * How the extension starts `clawkb lsp`: plain functions with no VS Code import,
 * so node's test runner checks them (test/launch.test.mjs) without an editor.
 */
import * as fs from "node:fs";
import * as path from "node:path";

export interface Settings {
  /** the clawkb executable; "" = search the PATH, then the workspace's .venv */
  command: string;
  /** knowledge-base folder passed as --kb; "" = found by the server from the workspace */
  kb: string;
  /** language ids to serve; empty = every file */
  languages: string[];
}

export interface ServerPlan {
  command: string;
  args: string[];
  cwd: string | undefined;
}

export type Plan = { ok: true; server: ServerPlan; selector: Selector[] } | { ok: false; error: string };

export interface Selector {
  scheme: string;
  language?: string;
}

/** Is `file` an executable regular file? */
export function isExecutable(file: string): boolean {
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) return false;
    if (process.platform === "win32") return true;
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Settings as read from a configuration getter, with wrong types replaced by defaults. */
export function readSettings(get: (key: string) => unknown): Settings {
  const text = (v: unknown) => (typeof v === "string" ? v.trim() : "");
  const langs = get("languages");
  return {
    command: text(get("command")),
    kb: text(get("kb")),
    languages: Array.isArray(langs) ? langs.filter((l): l is string => typeof l === "string" && l !== "") : [],
  };
}

/** ~ at the start of a path is the home folder. */
export function expandHome(p: string, home: string): string {
  return p === "~" || p.startsWith("~/") ? path.join(home, p.slice(1)) : p;
}

/**
 * The clawkb executable: the setting when given, else `clawkb` on the PATH,
 * else `.venv/bin/clawkb` in a workspace folder (a source checkout). null when none.
 */
export function findCommand(
  settings: Settings,
  folders: string[],
  env: Record<string, string | undefined>,
  exists: (file: string) => boolean = isExecutable,
  platform: string = process.platform,
): string | null {
  const home = env.HOME ?? env.USERPROFILE ?? "";
  if (settings.command) {
    const given = expandHome(settings.command, home);
    if (given.includes("/") || given.includes("\\")) {
      const first = folders[0];
      const full = path.isAbsolute(given) || !first ? given : path.join(first, given);
      return exists(full) ? full : null;
    }
    return onPath(given, env, exists, platform);
  }
  const found = onPath("clawkb", env, exists, platform);
  if (found) return found;
  const venv = platform === "win32" ? path.join(".venv", "Scripts", "clawkb.exe") : path.join(".venv", "bin", "clawkb");
  for (const folder of folders) {
    const candidate = path.join(folder, venv);
    if (exists(candidate)) return candidate;
  }
  return null;
}

function onPath(
  name: string,
  env: Record<string, string | undefined>,
  exists: (file: string) => boolean,
  platform: string,
): string | null {
  const sep = platform === "win32" ? ";" : ":";
  const exts = platform === "win32" ? [".exe", ".cmd", ""] : [""];
  for (const dir of (env.PATH ?? env.Path ?? "").split(sep)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (exists(candidate)) return candidate;
    }
  }
  return null;
}

/** Which documents the client sends to the server. */
export function documentSelector(languages: string[]): Selector[] {
  if (languages.length === 0) {
    return [{ scheme: "file" }, { scheme: "untitled" }];
  }
  return languages.flatMap((language) => [
    { scheme: "file", language },
    { scheme: "untitled", language },
  ]);
}

/** Everything activation needs: the server command line and the document selector, or why not. */
export function plan(
  settings: Settings,
  folders: string[],
  env: Record<string, string | undefined>,
  exists: (file: string) => boolean = isExecutable,
  platform: string = process.platform,
): Plan {
  const command = findCommand(settings, folders, env, exists, platform);
  if (command === null) {
    const what = settings.command ? `the clawkb.command setting (${settings.command})` : "`clawkb` on the PATH or in .venv/bin";
    return {
      ok: false,
      error: `clawkb: cannot find ${what}; install it (make install in a clawkb checkout, or pip install 'clawkb[lsp]') or set clawkb.command`,
    };
  }
  const home = env.HOME ?? env.USERPROFILE ?? "";
  const args = settings.kb ? ["--kb", expandHome(settings.kb, home), "lsp"] : ["lsp"];
  return {
    ok: true,
    server: { command, args, cwd: folders[0] },
    selector: documentSelector(settings.languages),
  };
}
