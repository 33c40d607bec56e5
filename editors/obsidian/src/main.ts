/**
 * The Obsidian side: settings, the search modal, the side panel (search + streamed
 * answers with clickable citations), the ```clawkb code block and re-index on
 * vault changes. Everything that does not need Obsidian lives in core/ and is
 * tested by `npm test` against a real `clawkb serve`.
 */
import { FileSystemAdapter, ItemView, MarkdownRenderChild, Modal, Notice, Plugin, PluginSettingTab, Setting, TAbstractFile, TFile, type App, type WorkspaceLeaf } from "obsidian";
import { ApiError, ClawkbClient, type SearchResult } from "./core/api";
import { parseBlock } from "./core/codeblock";
import { ReindexQueue } from "./core/reindex";
import { answerSegments, hitViews, sourceViews, type HitView, type Target } from "./core/render";

interface Settings {
  serverUrl: string;
  token: string;
  reindexOnChange: boolean;
  debounceMs: number;
  pathPrefix: string;
  limit: number;
}

const DEFAULTS: Settings = {
  serverUrl: "http://127.0.0.1:3000",
  token: "",
  reindexOnChange: true,
  debounceMs: 1500,
  pathPrefix: "",
  limit: 8,
};

const VIEW = "clawkb-panel";

export default class ClawkbPlugin extends Plugin {
  settings: Settings = { ...DEFAULTS };
  client: ClawkbClient = new ClawkbClient(DEFAULTS);
  queue: ReindexQueue | null = null;
  /** the code blocks on screen, run again after each re-index */
  blocks = new Set<() => Promise<void>>();

  async onload(): Promise<void> {
    this.settings = { ...DEFAULTS, ...((await this.loadData()) as Partial<Settings> | null) };
    this.configure();
    this.addSettingTab(new ClawkbSettings(this.app, this));
    this.registerView(VIEW, (leaf) => new ClawkbPanel(leaf, this));
    this.addRibbonIcon("search", "clawkb", () => void this.openPanel());
    this.addCommand({ id: "search", name: "Search the knowledge base", callback: () => new SearchModal(this.app, this).open() });
    this.addCommand({ id: "open-panel", name: "Open the knowledge-base panel", callback: () => void this.openPanel() });
    this.addCommand({
      id: "reindex-note",
      name: "Re-index the current note",
      checkCallback: (checking) => {
        const file = this.app.workspace.getActiveFile();
        if (!file) return false;
        if (!checking && this.queue) {
          this.queue.push("modify", file.path);
          void this.queue.flush();
        }
        return true;
      },
    });
    this.registerMarkdownCodeBlockProcessor("clawkb", async (source, el, ctx) => {
      const run = await this.renderBlock(source, el);
      if (!run) return;
      const child = new MarkdownRenderChild(el);
      child.onunload = () => void this.blocks.delete(run);
      ctx.addChild(child);
      this.blocks.add(run);
    });
    const on = (kind: "create" | "modify" | "delete") => (file: TAbstractFile) => {
      if (this.settings.reindexOnChange && file instanceof TFile) this.queue?.push(kind, file.path);
    };
    this.app.workspace.onLayoutReady(() => {
      // vault "create" fires for every file while Obsidian loads; listen only afterwards
      this.registerEvent(this.app.vault.on("create", on("create")));
      this.registerEvent(this.app.vault.on("modify", on("modify")));
      this.registerEvent(this.app.vault.on("delete", on("delete")));
      this.registerEvent(
        this.app.vault.on("rename", (file, oldPath) => {
          if (this.settings.reindexOnChange && file instanceof TFile) this.queue?.push("rename", file.path, oldPath);
        }),
      );
    });
  }

  onunload(): void {
    void this.queue?.flush();
  }

  configure(): void {
    this.client = new ClawkbClient(this.settings);
    this.queue?.dispose();
    this.queue = new ReindexQueue((p) => this.client.index(p), this.settings.debounceMs, this.settings.pathPrefix, (results) => {
      const failed = results.filter((r) => !r.ok);
      if (failed.length > 0) new Notice(`clawkb: could not re-index ${failed[0].path}: ${failed[0].message}`);
      if (failed.length < results.length) for (const run of this.blocks) void run();
    });
  }

  async save(): Promise<void> {
    await this.saveData(this.settings);
    this.configure();
  }

  vaultBase(): string | null {
    const adapter = this.app.vault.adapter;
    return adapter instanceof FileSystemAdapter ? adapter.getBasePath() : null;
  }

  async openPanel(): Promise<void> {
    const existing = this.app.workspace.getLeavesOfType(VIEW)[0];
    const leaf = existing ?? this.app.workspace.getRightLeaf(false);
    if (!leaf) return;
    if (!existing) await leaf.setViewState({ type: VIEW, active: true });
    this.app.workspace.revealLeaf(leaf);
  }

  /** Open a hit or citation: the vault note at its line, else say where it is. */
  async open(t: Target): Promise<void> {
    if (t.vaultPath !== null) {
      const file = this.app.vault.getAbstractFileByPath(t.vaultPath);
      if (file instanceof TFile) {
        await this.app.workspace.getLeaf(false).openFile(file, { eState: { line: Math.max(0, t.line - 1) } });
        return;
      }
    }
    new Notice(`clawkb: ${t.path}:${t.line} (#${t.anchor}) is outside this vault`);
  }

  renderHits(el: HTMLElement, views: HitView[], empty: string): void {
    el.empty();
    if (views.length === 0) {
      el.createDiv({ cls: "clawkb-empty", text: empty });
      return;
    }
    const list = el.createEl("ol", { cls: "clawkb-hits" });
    for (const v of views) {
      const item = list.createEl("li");
      const a = item.createEl("a", { text: v.location, href: "#", cls: "clawkb-location" });
      a.addEventListener("click", (e) => {
        e.preventDefault();
        void this.open(v.target);
      });
      if (v.section) item.createDiv({ cls: "clawkb-section", text: `§ ${v.section}` });
      if (v.snippet) item.createDiv({ cls: "clawkb-snippet", text: v.snippet });
    }
  }

  /** The ```clawkb block: live results (or a cited answer) inside the note; returns its re-run. */
  async renderBlock(source: string, el: HTMLElement): Promise<(() => Promise<void>) | null> {
    const parsed = parseBlock(source);
    if (!parsed.ok) {
      el.createDiv({ cls: "clawkb-error", text: `clawkb: ${parsed.error}` });
      return null;
    }
    const { spec } = parsed;
    const box = el.createDiv({ cls: "clawkb-block" });
    const head = box.createDiv({ cls: "clawkb-head" });
    head.createSpan({ text: `clawkb: ${spec.query}` });
    const refresh = head.createEl("button", { text: "↻", attr: { "aria-label": "Run again" } });
    const body = box.createDiv();
    const run = async () => {
      body.setText("searching…");
      try {
        if (spec.ask) {
          await this.streamAnswer(spec.query, body);
        } else {
          const res = await this.client.search(spec.query, { limit: spec.limit, path: spec.path, mode: spec.mode ?? undefined });
          this.renderHits(body, hitViews(res, this.vaultBase()), res.message || "no passage found");
        }
      } catch (err) {
        body.empty();
        body.createDiv({ cls: "clawkb-error", text: message(err) });
      }
    };
    refresh.addEventListener("click", () => void run());
    await run();
    return spec.ask ? null : run; // answers are not re-asked on every save
  }

  /** Stream an answer into `el`: tokens as they come, then the text with clickable [n] and its sources. */
  async streamAnswer(question: string, el: HTMLElement): Promise<void> {
    el.empty();
    const text = el.createDiv({ cls: "clawkb-answer" });
    let soFar = "";
    const answer = await this.client.ask(
      question,
      (t) => {
        soFar += t;
        text.setText(soFar);
      },
      { limit: this.settings.limit },
    );
    text.empty();
    const base = this.vaultBase();
    for (const seg of answerSegments(answer, base)) {
      if (seg.kind === "text") {
        text.appendText(seg.text);
      } else {
        const a = text.createEl("a", { text: seg.label, href: "#", cls: "clawkb-cite" });
        const target = seg.target;
        a.addEventListener("click", (e) => {
          e.preventDefault();
          if (target) void this.open(target);
        });
      }
    }
    if (answer.citations.length > 0) this.renderHits(el.createDiv({ cls: "clawkb-sources" }), sourceViews(answer, base), "");
  }
}

function message(err: unknown): string {
  return err instanceof ApiError ? `clawkb: ${err.message}` : `clawkb: ${(err as Error).message ?? String(err)}`;
}

class SearchModal extends Modal {
  private timer: number | null = null;
  private seq = 0;

  constructor(
    app: App,
    private readonly plugin: ClawkbPlugin,
  ) {
    super(app);
  }

  onOpen(): void {
    this.titleEl.setText("Search the knowledge base");
    const input = this.contentEl.createEl("input", { type: "search", cls: "clawkb-input", attr: { placeholder: "DDR 走线阻抗, GPIOA_MODER, …" } });
    const results = this.contentEl.createDiv();
    let composing = false;
    input.addEventListener("compositionstart", () => (composing = true));
    input.addEventListener("compositionend", () => {
      composing = false;
      this.schedule(input.value, results);
    });
    input.addEventListener("input", () => {
      if (!composing) this.schedule(input.value, results);
    });
    input.focus();
  }

  private schedule(q: string, el: HTMLElement): void {
    if (this.timer !== null) window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => void this.run(q, el), 150);
  }

  private async run(q: string, el: HTMLElement): Promise<void> {
    const seq = ++this.seq;
    if (!q.trim()) {
      el.empty();
      return;
    }
    try {
      const res: SearchResult = await this.plugin.client.search(q, { limit: this.plugin.settings.limit });
      if (seq !== this.seq) return; // a newer query is on its way
      this.plugin.renderHits(el, hitViews(res, this.plugin.vaultBase()), res.message || "no passage found");
      el.querySelectorAll("a.clawkb-location").forEach((a) => a.addEventListener("click", () => this.close()));
    } catch (err) {
      if (seq !== this.seq) return;
      el.empty();
      el.createDiv({ cls: "clawkb-error", text: message(err) });
    }
  }

  onClose(): void {
    this.contentEl.empty();
  }
}

class ClawkbPanel extends ItemView {
  constructor(
    leaf: WorkspaceLeaf,
    private readonly plugin: ClawkbPlugin,
  ) {
    super(leaf);
  }

  getViewType(): string {
    return VIEW;
  }

  getDisplayText(): string {
    return "clawkb";
  }

  getIcon(): string {
    return "search";
  }

  async onOpen(): Promise<void> {
    const root = this.contentEl;
    root.empty();
    const search = root.createEl("input", { type: "search", cls: "clawkb-input", attr: { placeholder: "Search…" } });
    const results = root.createDiv();
    root.createEl("hr");
    const ask = root.createEl("textarea", { cls: "clawkb-ask", attr: { rows: "3", placeholder: "Ask a question (Enter; Shift+Enter for a new line)" } });
    const answer = root.createDiv();
    search.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || e.isComposing) return;
      results.setText("searching…");
      this.plugin.client
        .search(search.value, { limit: this.plugin.settings.limit })
        .then((res) => this.plugin.renderHits(results, hitViews(res, this.plugin.vaultBase()), res.message || "no passage found"))
        .catch((err) => {
          results.empty();
          results.createDiv({ cls: "clawkb-error", text: message(err) });
        });
    });
    ask.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
      e.preventDefault();
      if (!ask.value.trim()) return;
      this.plugin.streamAnswer(ask.value, answer).catch((err) => {
        answer.empty();
        answer.createDiv({ cls: "clawkb-error", text: message(err) });
      });
    });
  }
}

class ClawkbSettings extends PluginSettingTab {
  constructor(
    app: App,
    private readonly plugin: ClawkbPlugin,
  ) {
    super(app, plugin);
  }

  display(): void {
    const el = this.containerEl;
    el.empty();
    const s = this.plugin.settings;
    const save = () => void this.plugin.save();
    new Setting(el)
      .setName("Server URL")
      .setDesc("Where `clawkb serve` listens (serve the vault folder: clawkb serve /path/to/vault).")
      .addText((t) => t.setValue(s.serverUrl).onChange((v) => ((s.serverUrl = v.trim()), save())));
    new Setting(el)
      .setName("Token")
      .setDesc("The server's --token, sent as Authorization: Bearer; empty when the server has none.")
      .addText((t) => {
        t.inputEl.type = "password";
        t.setValue(s.token).onChange((v) => ((s.token = v.trim()), save()));
      });
    new Setting(el)
      .setName("Re-index on vault changes")
      .setDesc("Send changed notes to POST /api/v1/index after a quiet period.")
      .addToggle((t) => t.setValue(s.reindexOnChange).onChange((v) => ((s.reindexOnChange = v), save())));
    new Setting(el)
      .setName("Quiet period (ms)")
      .addText((t) =>
        t.setValue(String(s.debounceMs)).onChange((v) => {
          const n = Number(v);
          if (Number.isInteger(n) && n >= 100) ((s.debounceMs = n), save());
        }),
      );
    new Setting(el)
      .setName("Vault folder inside the served root")
      .setDesc("Empty when the server's first folder is this vault; else the vault's path relative to it.")
      .addText((t) => t.setValue(s.pathPrefix).onChange((v) => ((s.pathPrefix = v.trim()), save())));
    new Setting(el)
      .setName("Results")
      .addSlider((sl) => sl.setLimits(1, 20, 1).setValue(s.limit).setDynamicTooltip().onChange((v) => ((s.limit = v), save())));
    new Setting(el).setName("Check the connection").addButton((b) =>
      b.setButtonText("Test").onClick(async () => {
        try {
          const st = await this.plugin.client.status();
          new Notice(`clawkb: connected — ${String(st.documents ?? "?")} documents, ${String(st.chunks ?? "?")} chunks`);
        } catch (err) {
          new Notice(message(err));
        }
      }),
    );
  }
}
