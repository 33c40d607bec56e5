/** VS Code entry point: starts `clawkb lsp` through vscode-languageclient (logic in launch.ts). */
import * as vscode from "vscode";
import { LanguageClient, type LanguageClientOptions, type ServerOptions } from "vscode-languageclient/node";
import { plan, readSettings } from "./launch";

let client: LanguageClient | undefined;

async function start(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration("clawkb");
  const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
  const p = plan(readSettings((k) => config.get(k)), folders, process.env);
  if (!p.ok) {
    void vscode.window.showErrorMessage(p.error);
    return;
  }
  const run = { command: p.server.command, args: p.server.args, options: { cwd: p.server.cwd } };
  const serverOptions: ServerOptions = { run, debug: run };
  const clientOptions: LanguageClientOptions = {
    documentSelector: p.selector,
    outputChannelName: "clawkb",
  };
  client = new LanguageClient("clawkb", "clawkb knowledge base", serverOptions, clientOptions);
  context.subscriptions.push(client);
  await client.start();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand("clawkb.restart", async () => {
      await client?.stop();
      client = undefined;
      await start(context);
    }),
    vscode.commands.registerCommand("clawkb.searchPrompt", async () => {
      const editor = vscode.window.activeTextEditor;
      const selected = editor ? editor.document.getText(editor.selection) : "";
      const query = await vscode.window.showInputBox({ prompt: "Search the knowledge base", value: selected });
      if (query) await vscode.commands.executeCommand("clawkb.search", query);
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("clawkb")) void vscode.commands.executeCommand("clawkb.restart");
    }),
  );
  await start(context);
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
