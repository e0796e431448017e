// The one way this dashboard makes DOM: h(tag, attrs, ...children).  A
// child that is not a Node becomes a text node, so whatever came from a
// model, a repository, a command or a parameter is text, never markup.
// Nothing here (or anywhere in ui/) assigns innerHTML or outerHTML.

const SAFE_HREF = /^(#\/|\/v1\/|https?:\/\/)/;

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'href') {
      // no javascript: or data: links out of data
      if (SAFE_HREF.test(String(v))) el.setAttribute('href', String(v));
    } else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function usd(micros) {
  if (micros === null || micros === undefined) return '—';
  return '$' + (micros / 1e6).toFixed(micros < 10000 && micros > 0 ? 4 : 2);
}

export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toLocaleString();
}

export function duration(from, to) {
  if (!from) return '—';
  const ms = (to ? new Date(to) : new Date()) - new Date(from);
  if (!(ms >= 0)) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

export function status(s) {
  return h('span', { class: 'status st-' + String(s).replace(/[^a-z_]/g, '') }, s);
}

// A block of long text, collapsed past limit characters.
export function longText(text, limit = 600) {
  if (typeof text !== 'string') {
    const one = JSON.stringify(text);
    if (one !== undefined && one.length <= 160) return h('pre', { class: 'text' }, one);
  }
  const s = typeof text === 'string' ? text : JSON.stringify(text, null, 2);
  if (s.length <= limit) return h('pre', { class: 'text' }, s);
  return h('details', { class: 'long' },
    h('summary', {}, s.slice(0, 120).replace(/\s+/g, ' '), '… (' + s.length + ' characters)'),
    h('pre', { class: 'text' }, s));
}
