// A run's Server-Sent Events read with fetch rather than EventSource:
// EventSource only hands out the event names a page listens for by name,
// so an event type this page does not know yet would be skipped.  Here
// every event is handed on, in order; a dropped connection is resumed with
// Last-Event-ID after the server's retry: hint, and a 204 (the client has
// the terminal event already) or the terminal event ends it.
//
// openStream(url, {onEvent(type, seq, data), onState(text), onRefused(status)})
// returns a function that closes it.
export function openStream(url, h) {
  let last = 0;
  let retry = 2000;
  let closed = false;
  let ctrl = null;

  async function once() {
    ctrl = new AbortController();
    const headers = { Accept: 'text/event-stream' };
    if (last) headers['Last-Event-ID'] = String(last);
    const res = await fetch(url, { headers, credentials: 'same-origin', cache: 'no-store', signal: ctrl.signal });
    if (res.status === 204) return 'done';
    if (!res.ok) { h.onRefused(res.status); return 'refused'; }
    h.onState('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = { type: 'message', id: null, data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return 'dropped';
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (ev.data.length && ev.id !== null) {
            last = Number(ev.id);
            if (h.onEvent(ev.type, last, ev.data.join('\n')) === 'terminal') return 'done';
          }
          ev = { type: 'message', id: null, data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        const val = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (field === 'event') ev.type = val;
        else if (field === 'data') ev.data.push(val);
        else if (field === 'id' && /^\d+$/.test(val)) ev.id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) retry = Number(val);
      }
    }
  }

  (async () => {
    while (!closed) {
      let how;
      try { how = await once(); } catch { how = closed ? 'done' : 'dropped'; }
      if (how !== 'dropped' || closed) break;
      h.onState('reconnecting…');
      await new Promise((r) => setTimeout(r, retry));
    }
  })();
  return () => { closed = true; if (ctrl) ctrl.abort(); };
}
