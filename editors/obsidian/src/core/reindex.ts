/**
 * Vault changes → `POST /api/v1/index`, debounced. Saving a note fires many
 * modify events; the queue waits for `delayMs` of quiet, then indexes each
 * changed file once. A deleted file (or a rename's old name) is re-indexed
 * through its folder, which removes what is gone; paths outside `prefix`-mapped
 * roots fail with the server's one-line message and are reported, not retried.
 */
export type ChangeKind = "create" | "modify" | "delete" | "rename";

export interface IndexResult {
  path: string;
  ok: boolean;
  message: string;
}

export class ReindexQueue {
  private pending = new Set<string>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<IndexResult[]> | null = null;

  constructor(
    private readonly index: (path: string) => Promise<unknown>,
    private readonly delayMs: number,
    /** where the vault lies inside the server's first root ("" = the vault is the root) */
    private readonly prefix = "",
    private readonly onDone: (results: IndexResult[]) => void = () => {},
    /** only these extensions are sent (the server skips others anyway) */
    private readonly extensions: string[] = ["md", "txt", "pdf", "html", "csv", "json", "yaml", "yml"],
  ) {}

  /** The server path for a vault path. */
  serverPath(vaultPath: string): string {
    const p = vaultPath.replace(/^\/+/, "");
    return this.prefix ? `${this.prefix.replace(/\/+$/, "")}/${p}` : p;
  }

  private folderOf(vaultPath: string): string {
    const i = vaultPath.lastIndexOf("/");
    return i < 0 ? (this.prefix.replace(/\/+$/, "") || ".") : this.serverPath(vaultPath.slice(0, i));
  }

  wanted(vaultPath: string): boolean {
    const dot = vaultPath.lastIndexOf(".");
    return dot > 0 && this.extensions.includes(vaultPath.slice(dot + 1).toLowerCase()) && !vaultPath.split("/").some((p) => p.startsWith("."));
  }

  /** Record a change; `oldPath` for a rename. */
  push(kind: ChangeKind, vaultPath: string, oldPath?: string): void {
    if (kind === "delete") {
      if (this.wanted(vaultPath)) this.pending.add(this.folderOf(vaultPath));
    } else {
      if (this.wanted(vaultPath)) this.pending.add(this.serverPath(vaultPath));
      if (kind === "rename" && oldPath && this.wanted(oldPath)) this.pending.add(this.folderOf(oldPath));
    }
    if (this.pending.size === 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, this.delayMs);
  }

  get size(): number {
    return this.pending.size;
  }

  /** Index everything pending now (after a running flush, so requests never overlap). */
  async flush(): Promise<IndexResult[]> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.running) await this.running;
    const paths = [...this.pending];
    this.pending.clear();
    if (paths.length === 0) return [];
    this.running = (async () => {
      const results: IndexResult[] = [];
      for (const path of paths) {
        try {
          await this.index(path);
          results.push({ path, ok: true, message: "" });
        } catch (err) {
          results.push({ path, ok: false, message: (err as Error).message });
        }
      }
      return results;
    })();
    try {
      const results = await this.running;
      this.onDone(results);
      return results;
    } finally {
      this.running = null;
    }
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending.clear();
  }
}
