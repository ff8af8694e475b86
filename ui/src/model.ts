// One conversation as the UI shows it, folded from the task's event log: the Task, status
// updates (replies, echoes of participants' messages, tool progress, substates) and artifact
// updates (a reply streamed as it is written, A2UI surfaces). Every event is folded once by
// its SSE id, so a replay from the start, a resumed stream and a send's own stream together
// never show anything twice.

import { MessageProcessor } from '@a2ui/web_core/v0_9';
import { NS } from './api';

export const A2UI = 'application/a2ui+json';

export type Entry =
  | { kind: 'message'; id: string; role: 'user' | 'agent'; who: string; text: string; data: string[] }
  | { kind: 'stream'; id: string; text: string }
  | { kind: 'tool'; id: string; name: string; phase: string; outcome: string; detail: string; ms?: number }
  | { kind: 'surface'; id: string; surfaceId: string; open: boolean }
  | { kind: 'note'; id: string; text: string };

export interface Head {
  state: string;
  substate: string;
  name: string;
  participants: { id: string; role: string }[];
  subTasks: string[];
  parentTasks: string[];
}

export class Conversation {
  taskId = '';
  contextId = '';
  head: Head = { state: '', substate: '', name: '', participants: [], subTasks: [], parentTasks: [] };
  entries: Entry[] = [];
  /** The id of the newest event folded (for `Last-Event-ID`). */
  lastEventId?: string;
  private seen = new Set<string>();
  private messages = new Set<string>();

  constructor(readonly processor: MessageProcessor<any>) {}

  /** Folds one stream event; false when it was folded before. */
  fold(event: any, id?: string): boolean {
    if (id !== undefined) {
      if (this.seen.has(id)) return false;
      this.seen.add(id);
      this.lastEventId = id;
    }
    if (event.task) this.foldTask(event.task);
    else if (event.statusUpdate) this.foldStatus(event.statusUpdate);
    else if (event.artifactUpdate) this.foldArtifact(event.artifactUpdate);
    else if (event.message) this.addMessage(event.message);
    return true;
  }

  /** A task read whole (GetTask of an ended task, which no stream replays). */
  foldTask(task: any) {
    this.taskId = task.id;
    this.contextId = task.contextId ?? this.contextId;
    this.setHead(task.status, task.metadata);
    for (const m of task.history ?? []) this.addMessage(m);
    for (const a of task.artifacts ?? []) {
      if (a.name === 'a2ui') this.foldArtifact({ artifact: a });
    }
    if (task.status?.message) this.addMessage(task.status.message);
  }

  private foldStatus(update: any) {
    this.taskId = update.taskId ?? this.taskId;
    this.setHead(update.status, update.metadata);
    const tool = update.metadata?.[`${NS}/tool`];
    if (tool) this.foldTool(tool);
    const message = update.status?.message;
    if (message) {
      if (message.role === 'ROLE_AGENT') {
        // The whole reply: the streamed one it replaces goes.
        this.entries = this.entries.filter((e) => e.kind !== 'stream');
      }
      this.addMessage(message);
    }
  }

  private foldTool(mark: any) {
    const id = `tool-${mark.callId}`;
    const existing = this.entries.find((e) => e.kind === 'tool' && e.id === id) as Extract<Entry, { kind: 'tool' }>;
    const detail = mark.taskRef ? `sub-task ${mark.taskRef}` : (mark.arguments ?? '');
    if (existing) {
      existing.phase = mark.phase;
      existing.outcome = mark.outcome ?? existing.outcome;
      existing.ms = mark.durationMs ?? existing.ms;
      if (detail) existing.detail = detail;
    } else {
      this.entries.push({ kind: 'tool', id, name: mark.name, phase: mark.phase, outcome: mark.outcome ?? '', detail, ms: mark.durationMs });
    }
  }

  private foldArtifact(update: any) {
    const artifact = update.artifact ?? {};
    if (artifact.name === 'a2ui') {
      const messages = (artifact.parts ?? []).filter((p: any) => p.mediaType === A2UI).map((p: any) => p.data);
      for (const m of messages) {
        if (m.createSurface) {
          this.entries.push({ kind: 'surface', id: `surface-${m.createSurface.surfaceId}-${artifact.artifactId}`, surfaceId: m.createSurface.surfaceId, open: true });
        }
        if (m.deleteSurface) {
          for (const e of this.entries) {
            if (e.kind === 'surface' && e.surfaceId === m.deleteSurface.surfaceId) e.open = false;
          }
        }
      }
      try {
        this.processor.processMessages(messages);
      } catch (e) {
        this.entries.push({ kind: 'note', id: `a2ui-error-${artifact.artifactId}`, text: `A2UI: ${(e as Error).message}` });
      }
      return;
    }
    const text = (artifact.parts ?? []).map((p: any) => p.text ?? '').join('');
    const id = `stream-${artifact.artifactId}`;
    const existing = this.entries.find((e) => e.kind === 'stream' && e.id === id) as Extract<Entry, { kind: 'stream' }>;
    if (existing) existing.text = update.append ? existing.text + text : text;
    else this.entries.push({ kind: 'stream', id, text });
  }

  private setHead(status: any, metadata: any) {
    if (status?.state) this.head.state = status.state;
    const sub = metadata?.[`${NS}/status`]?.substate;
    if (status?.state) this.head.substate = sub ?? '';
    const data = metadata?.[`${NS}/task`];
    if (data) {
      this.head.name = data.name ?? this.head.name;
      this.head.participants = (data.participants ?? []).map((p: any) => ({ id: p.id, role: p.role }));
      this.head.subTasks = (data.sub_tasks ?? []).map((t: any) => t.task_id);
      this.head.parentTasks = (data.parent_tasks ?? []).map((t: any) => t.task_id);
    }
    const ref = metadata?.task_ref;
    if (ref && !this.head.subTasks.includes(ref)) this.head.subTasks.push(ref);
  }

  private addMessage(m: any) {
    if (!m?.messageId || this.messages.has(m.messageId)) return;
    this.messages.add(m.messageId);
    const parts = m.parts ?? [];
    const text = parts
      .filter((p: any) => typeof p.text === 'string')
      .map((p: any) => p.text)
      .join('\n');
    const data = parts.filter((p: any) => p.data !== undefined).map((p: any) => describe(p));
    const who = m.metadata?.[`${NS}/channel`]?.sender ?? m.metadata?.participant_id ?? '';
    const role = m.role === 'ROLE_AGENT' ? 'agent' : 'user';
    this.entries.push({ kind: 'message', id: m.messageId, role, who, text, data });
  }
}

/** A data part in a line: an A2UI action names what was pressed. */
function describe(part: any): string {
  const d = part.data;
  if (part.mediaType === A2UI && d?.action) return `pressed “${d.action.name}” on ${d.action.surfaceId}`;
  if (d?.kind === 'control') return `control: ${d.action}`;
  if (d?.kind) return `${d.kind} envelope`;
  return 'data';
}
