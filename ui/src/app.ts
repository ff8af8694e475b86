// The web UI at /ui (docs/ui.md): the task list, a conversation streamed as it is written,
// A2UI surfaces rendered with the official renderer (@a2ui/lit, v0_9) and their actions sent
// back as data parts. It speaks A2A's HTTP+JSON binding to the harness that serves it.

import { html, nothing, render, type TemplateResult } from 'lit';
import { MessageProcessor } from '@a2ui/web_core/v0_9';
import { basicCatalog } from '@a2ui/lit/v0_9';
import { Api, ApiError, NS, messageId } from './api';
import { A2UI, Conversation, type Entry } from './model';

const WHO_KEY = 'tiny-harness.participant';
const TERMINAL = ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'];
const STATES = ['', 'TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_INPUT_REQUIRED', ...TERMINAL];
const PAGE = 20;

/** Where the harness's routes are: the UI is served at `<prefix>/ui/`. */
const prefix = location.pathname.replace(/\/ui(\/.*)?$/, '');
const api = new Api(`${prefix}/a2a/rest`, () => who);

let who = localStorage.getItem(WHO_KEY) ?? '';
let error = '';
let sending = false;

// The task list.
let tasks: any[] = [];
let filter = '';
let pageTokens: string[] = [''];
let nextPageToken = '';
let listError = '';

// The open conversation and its streams.
let conversation: Conversation | null = null;
let following: AbortController | null = null;
const surfaces = new Map<string, any>();

function processor(): MessageProcessor<any> {
  surfaces.clear();
  const p = new MessageProcessor([basicCatalog], (action) => sendAction(action));
  p.onSurfaceCreated((s: any) => {
    surfaces.set(s.id, s);
  });
  p.onSurfaceDeleted((id: string) => {
    surfaces.delete(id);
  });
  return p;
}

function label(state: string): string {
  return state.replace('TASK_STATE_', '').replace('_', ' ').toLowerCase();
}

// ---------------------------------------------------------------- task list

async function loadTasks() {
  const query = new URLSearchParams({ pageSize: String(PAGE) });
  if (filter) query.set('status', filter);
  const token = pageTokens[pageTokens.length - 1];
  if (token) query.set('pageToken', token);
  try {
    const answer = await api.call('GET', `/tasks?${query}`);
    tasks = answer.tasks ?? [];
    nextPageToken = answer.nextPageToken ?? '';
    listError = '';
  } catch (e) {
    listError = (e as Error).message;
  }
  draw();
}

function taskName(t: any): string {
  return t.metadata?.[`${NS}/task`]?.name || t.id;
}

function taskList(): TemplateResult {
  const current = conversation?.taskId;
  return html`
    <section class="tasks" aria-label="Tasks">
      <div class="tasks-bar">
        <button type="button" @click=${() => (location.hash = '#/new')}>New conversation</button>
        <label>
          State
          <select
            aria-label="Filter tasks by state"
            .value=${filter}
            @change=${(e: Event) => {
              filter = (e.target as HTMLSelectElement).value;
              pageTokens = [''];
              void loadTasks();
            }}
          >
            ${STATES.map((s) => html`<option value=${s} ?selected=${s === filter}>${s ? label(s) : 'any'}</option>`)}
          </select>
        </label>
      </div>
      ${listError ? html`<p class="error" role="alert">${listError}</p>` : nothing}
      <ul class="task-list">
        ${tasks.map((t) => {
          const sub = t.metadata?.[`${NS}/status`]?.substate;
          const people = (t.metadata?.[`${NS}/task`]?.participants ?? []).map((p: any) => p.id).join(', ');
          return html`<li class=${t.id === current ? 'current' : ''}>
            <a href="#/tasks/${encodeURIComponent(t.id)}" data-task=${t.id}>
              <span class="task-name">${taskName(t)}</span>
              <span class="badge state-${label(t.status?.state ?? '').replace(' ', '-')}">${label(t.status?.state ?? '')}</span>
              ${sub ? html`<span class="substate">${sub}</span>` : nothing}
              ${people ? html`<span class="people">${people}</span>` : nothing}
            </a>
          </li>`;
        })}
        ${tasks.length === 0 && !listError ? html`<li class="empty">No tasks.</li>` : nothing}
      </ul>
      <div class="pager">
        <button
          type="button"
          ?disabled=${pageTokens.length <= 1}
          @click=${() => {
            pageTokens.pop();
            void loadTasks();
          }}
        >
          Newer
        </button>
        <button
          type="button"
          ?disabled=${!nextPageToken}
          @click=${() => {
            pageTokens.push(nextPageToken);
            void loadTasks();
          }}
        >
          Older
        </button>
      </div>
    </section>
  `;
}

// ---------------------------------------------------------------- conversation

/** Opens task `id`: replays its log from the start and follows it (a reload lands here). */
async function open(id: string) {
  stopFollowing();
  conversation = new Conversation(processor());
  conversation.taskId = id;
  error = '';
  draw();
  let task: any;
  try {
    task = await api.call('GET', `/tasks/${encodeURIComponent(id)}`);
  } catch (e) {
    error = (e as Error).message;
    draw();
    return;
  }
  if (conversation?.taskId !== id) return;
  if (TERMINAL.includes(task.status?.state)) {
    // An ended task's log is not streamed again: its stored history and surfaces.
    conversation.foldTask(task);
    draw();
    return;
  }
  void follow(conversation);
}

function stopFollowing() {
  following?.abort();
  following = null;
}

/** Follows the open task's log until it ends; a dropped connection resumes after the last event. */
async function follow(c: Conversation) {
  const controller = new AbortController();
  following = controller;
  let delay = 500;
  while (!controller.signal.aborted && conversation === c && !TERMINAL.includes(c.head.state)) {
    try {
      const path = `/tasks/${encodeURIComponent(c.taskId)}:subscribe`;
      for await (const e of api.stream(path, { id: c.taskId }, c.lastEventId, controller.signal)) {
        if (c.fold(e.data, e.id)) draw();
        delay = 500;
      }
    } catch (e) {
      if (controller.signal.aborted) return;
      if (e instanceof ApiError && e.status === 400 && c.lastEventId) {
        // The log was rewritten after a crash (docs/event-log.md): read it again.
        void open(c.taskId);
        return;
      }
      if (e instanceof ApiError && e.status !== 0 && e.status < 500) {
        // Ended meanwhile, or not ours to see: show what the server said and the stored task.
        try {
          const task = await api.call('GET', `/tasks/${encodeURIComponent(c.taskId)}`);
          c.foldTask(task);
        } catch (again) {
          error = (again as Error).message;
        }
        draw();
        return;
      }
    }
    if (controller.signal.aborted || TERMINAL.includes(c.head.state)) break;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
  if (following === controller) following = null;
}

/** Sends parts to the open task (or opens one), streaming the reply as it is written. */
async function send(parts: any[]) {
  const c = conversation ?? new Conversation(processor());
  conversation = c;
  const message: any = {
    messageId: messageId(),
    role: 'ROLE_USER',
    parts,
    metadata: { a2uiClientCapabilities: c.processor.getClientCapabilities() },
  };
  if (c.taskId) message.taskId = c.taskId;
  sending = true;
  error = '';
  draw();
  try {
    for await (const e of api.stream('/message:stream', { message })) {
      const first = !c.taskId;
      if (c.fold(e.data, e.id)) draw();
      if (first && c.taskId) {
        history.replaceState(null, '', `#/tasks/${encodeURIComponent(c.taskId)}`);
        void loadTasks();
      }
    }
  } catch (e) {
    error = (e as Error).message;
  } finally {
    sending = false;
  }
  if (conversation === c && c.taskId && !following && !TERMINAL.includes(c.head.state)) void follow(c);
  void loadTasks();
  draw();
}

function sendText(text: string) {
  if (!text.trim()) return;
  void send([{ text }]);
}

/** A renderer's action, as the A2UI extension says: a data part of the A2UI media type. */
function sendAction(action: any) {
  void send([{ data: { version: 'v0.9', action }, mediaType: A2UI }]);
}

async function cancel() {
  if (!conversation?.taskId) return;
  try {
    const task = await api.call('POST', `/tasks/${encodeURIComponent(conversation.taskId)}:cancel`, {
      id: conversation.taskId,
    });
    conversation.foldTask(task);
    error = '';
  } catch (e) {
    error = (e as Error).message;
  }
  void loadTasks();
  draw();
}

function complete() {
  void send([{ data: { kind: 'control', action: 'complete' }, mediaType: 'application/vnd.tiny-harness.event+json' }]);
}

function entryView(e: Entry): TemplateResult {
  switch (e.kind) {
    case 'message':
      return html`<li class="entry message ${e.role}">
        <span class="who">${e.role === 'agent' ? 'agent' : e.who || 'you'}</span>
        ${e.text ? html`<p class="text">${e.text}</p>` : nothing}
        ${e.data.map((d) => html`<p class="data">${d}</p>`)}
      </li>`;
    case 'stream':
      return html`<li class="entry message agent streaming" aria-busy="true">
        <span class="who">agent</span>
        <p class="text">${e.text}</p>
      </li>`;
    case 'tool': {
      const doing = e.phase === 'call' ? 'running' : e.phase === 'delegated' ? 'waiting for its sub-task' : e.outcome;
      return html`<li class="entry tool">
        <span class="who">tool</span>
        <p><code>${e.name}</code> · ${doing}${e.ms !== undefined && e.phase === 'result' ? ` · ${e.ms} ms` : ''}</p>
        ${e.detail ? html`<p class="detail">${e.detail}</p>` : nothing}
      </li>`;
    }
    case 'surface': {
      const surface = surfaces.get(e.surfaceId);
      return html`<li class="entry surface" data-surface=${e.surfaceId}>
        ${e.open && surface
          ? html`<a2ui-surface .surface=${surface}></a2ui-surface>`
          : html`<p class="closed">(surface ${e.surfaceId} closed)</p>`}
      </li>`;
    }
    case 'note':
      return html`<li class="entry note">${e.text}</li>`;
  }
}

function conversationView(): TemplateResult {
  const c = conversation;
  const ended = !!c && TERMINAL.includes(c.head.state);
  const head = c?.head;
  return html`
    <section class="conversation" aria-label="Conversation">
      <header class="conv-head">
        <h2>${c?.taskId ? head?.name || c.taskId : 'New conversation'}</h2>
        ${c?.taskId
          ? html`<p class="status" aria-live="polite">
              <span class="badge state-${label(head?.state ?? '').replace(' ', '-')}">${label(head?.state ?? '')}</span>
              ${head?.substate ? html`<span class="substate">${head.substate}</span>` : nothing}
            </p>`
          : nothing}
        ${head?.participants.length
          ? html`<p class="people">Participants: ${head.participants.map((p) => `${p.id} (${p.role})`).join(', ')}</p>`
          : nothing}
        ${head?.subTasks.length
          ? html`<p class="links">
              Sub-tasks: ${head.subTasks.map((t) => html`<a href="#/tasks/${encodeURIComponent(t)}">${t}</a> `)}
            </p>`
          : nothing}
        ${head?.parentTasks.length
          ? html`<p class="links">
              Parent: ${head.parentTasks.map((t) => html`<a href="#/tasks/${encodeURIComponent(t)}">${t}</a> `)}
            </p>`
          : nothing}
        ${c?.taskId
          ? html`<div class="actions">
              <button type="button" ?disabled=${ended || sending} @click=${() => sendText('/help')}>Help</button>
              <button type="button" ?disabled=${ended || sending} @click=${() => sendText('/status')}>Status</button>
              <button type="button" ?disabled=${ended} @click=${() => void cancel()}>Cancel task</button>
              <button type="button" ?disabled=${ended || sending} @click=${complete}>Complete task</button>
            </div>`
          : nothing}
      </header>
      <ol class="timeline" aria-label="Messages" aria-live="polite">
        ${(c?.entries ?? []).map(entryView)}
      </ol>
      ${error ? html`<p class="error" role="alert">${error}</p>` : nothing}
      <form
        class="composer"
        @submit=${(e: Event) => {
          e.preventDefault();
          const box = (e.target as HTMLFormElement).elements.namedItem('text') as HTMLTextAreaElement;
          const text = box.value;
          box.value = '';
          sendText(text);
        }}
      >
        <label for="text">Message</label>
        <textarea
          id="text"
          name="text"
          rows="2"
          ?disabled=${ended}
          placeholder=${ended ? 'This task has ended.' : 'Write a message, or /help'}
          @keydown=${(e: KeyboardEvent) => {
            if (e.key === 'Enter' && !e.shiftKey) {
              e.preventDefault();
              (e.target as HTMLTextAreaElement).form?.requestSubmit();
            }
          }}
        ></textarea>
        <button type="submit" ?disabled=${ended || sending}>Send</button>
      </form>
    </section>
  `;
}

// ---------------------------------------------------------------- who you are

function whoView(): TemplateResult {
  return html`
    <section class="who-form" aria-label="Who you are">
      <form
        @submit=${(e: Event) => {
          e.preventDefault();
          const input = (e.target as HTMLFormElement).elements.namedItem('participant') as HTMLInputElement;
          const id = input.value.trim();
          if (!id) return;
          who = id;
          localStorage.setItem(WHO_KEY, id);
          void loadTasks();
          route();
        }}
      >
        <h2>Who are you?</h2>
        <p>Your participant id names you on every task (<code>X-Participant-Id</code>); this browser remembers it.</p>
        <label for="participant">Participant id</label>
        <input id="participant" name="participant" autocomplete="username" required .value=${who} />
        <button type="submit">Continue</button>
      </form>
    </section>
  `;
}

let choosing = !who;

function draw() {
  const app = document.getElementById('app')!;
  // The timeline follows the newest entry unless the user scrolled up to read.
  const before = app.querySelector('ol.timeline');
  const atEnd = !before || before.scrollHeight - before.scrollTop - before.clientHeight < 80;
  render(
    html`
      <header class="top">
        <h1>tiny-harness</h1>
        ${who
          ? html`<p class="me">
              You are <strong>${who}</strong>
              <button type="button" @click=${() => ((choosing = true), draw())}>Change</button>
            </p>`
          : nothing}
      </header>
      ${choosing ? whoView() : html`<div class="layout">${taskList()} ${conversationView()}</div>`}
    `,
    app,
  );
  const after = app.querySelector('ol.timeline');
  if (after && atEnd) after.scrollTop = after.scrollHeight;
}

function route() {
  choosing = !who;
  if (choosing) {
    draw();
    return;
  }
  const match = location.hash.match(/^#\/tasks\/(.+)$/);
  const id = match ? decodeURIComponent(match[1]) : '';
  if (id && conversation?.taskId !== id) void open(id);
  if (!id && (conversation?.taskId || !conversation)) {
    stopFollowing();
    conversation = new Conversation(processor());
    error = '';
  }
  draw();
}

window.addEventListener('hashchange', route);
route();
void loadTasks();
// The list follows other participants' tasks too.
setInterval(() => {
  if (!choosing && document.visibilityState === 'visible') void loadTasks();
}, 3000);
