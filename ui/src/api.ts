// The A2A 1.0 HTTP+JSON binding as this UI uses it: JSON calls and SSE streams over fetch
// (POST streams, so no EventSource), with `X-Participant-Id` naming who the user is.

export const NS = 'io.github.madarauchiha-314.tiny-harness';

/** An error as the server worded it (A2A `error.message`), or the transport's. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** One SSE event: its `id:` (the log's seq, with its epoch after a cut) and its data. */
export interface SseEvent {
  id?: string;
  data: any;
}

export class Api {
  constructor(
    readonly base: string,
    private readonly who: () => string,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { 'A2A-Version': '1.0', 'Content-Type': 'application/json', ...extra };
    const who = this.who();
    if (who) h['X-Participant-Id'] = who;
    return h;
  }

  /** A JSON call; a refusal throws an [`ApiError`] with the server's words. */
  async call(method: string, path: string, body?: unknown): Promise<any> {
    let response: Response;
    try {
      response = await fetch(this.base + path, {
        method,
        headers: this.headers(),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(`the server cannot be reached (${(e as Error).message})`, 0);
    }
    return read(response);
  }

  /** An SSE stream of a POST; throws before the first event when the server refused it. */
  async *stream(path: string, body: unknown, lastEventId?: string, signal?: AbortSignal): AsyncGenerator<SseEvent> {
    const extra: Record<string, string> = { Accept: 'text/event-stream' };
    if (lastEventId) extra['Last-Event-ID'] = lastEventId;
    const response = await fetch(this.base + path, {
      method: 'POST',
      headers: this.headers(extra),
      body: JSON.stringify(body),
      signal,
    });
    if (!response.ok || !response.body) {
      await read(response);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        let id: string | undefined;
        const data: string[] = [];
        for (const line of frame.split(/\r?\n/)) {
          if (line.startsWith('id:')) id = line.slice(3).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
        }
        if (data.length) yield { id, data: JSON.parse(data.join('\n')) };
      }
    }
  }
}

async function read(response: Response): Promise<any> {
  const text = await response.text();
  let body: any = undefined;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    body = undefined;
  }
  if (!response.ok) {
    const message = body?.error?.message ?? (text || `${response.status} ${response.statusText}`);
    throw new ApiError(message, response.status);
  }
  return body;
}

/** A fresh message id. */
export function messageId(): string {
  // `crypto.randomUUID` needs a secure context; the UI may be reached over plain HTTP.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
