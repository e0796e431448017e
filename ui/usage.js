// A project's spend this month against its quota: a bar per day (SVG made
// with the DOM, no chart library) and the costliest runs.
import { h, clear, usd, status } from './dom.js';
import * as api from './api.js';

const NS = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function chart(month, days) {
  const [y, m] = month.split('-').map(Number);
  const n = new Date(Date.UTC(y, m, 0)).getUTCDate();
  const by = new Map(days.map((d) => [Number(d.day.slice(8, 10)), d.usd_micros]));
  const top1 = Math.max(0, ...by.values());
  const max = Math.max(1, top1);
  const W = 24, H = 160, top = 10;
  const svg = s('svg', { class: 'chart', id: 'spend-chart', viewBox: `0 0 ${n * W + 40} ${H + 30}`,
    role: 'img', 'aria-label': 'spend per day' });
  svg.append(s('text', { x: 0, y: top, class: 'axis' }, usd(top1)));
  for (let d = 1; d <= n; d++) {
    const v = by.get(d) || 0;
    const bh = Math.round((v / max) * (H - top));
    svg.append(s('rect', { x: 40 + (d - 1) * W, y: H - bh, width: W - 4, height: Math.max(bh, v ? 1 : 0),
      class: 'bar', 'data-day': d }, s('title', {}, `${month}-${String(d).padStart(2, '0')}: ${usd(v)}`)));
    if (d === 1 || d % 5 === 0) svg.append(s('text', { x: 40 + (d - 1) * W, y: H + 20, class: 'axis' }, d));
  }
  return svg;
}

export async function usageView(main, project) {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const month = /^\d{4}-\d{2}$/.test(params.get('month') || '') ? params.get('month')
    : new Date().toISOString().slice(0, 7);
  const u = await api.get(`/v1/projects/${project.id}/usage?month=${month}`);
  const pick = h('input', { type: 'month', id: 'usage-month', value: month, onchange: (e) => {
    location.hash = `#/projects/${project.id}/usage?month=${e.target.value}`;
  } });
  const quota = u.quota_usd_micros;
  clear(main).append(h('h1', {}, 'Usage of ', project.name, ' ', pick),
    h('p', { id: 'usage-total' }, usd(u.spent_usd_micros), ' spent',
      quota === null ? ' (no monthly quota)' : [' of a ', usd(quota), ' quota ',
        h('meter', { min: 0, max: quota, value: Math.min(u.spent_usd_micros, quota), high: quota * 0.8 })],
      ' · ', usd(u.reserved_usd_micros), ' reserved · ', u.model_calls, ' model calls · ',
      u.tokens_in, ' tokens in, ', u.tokens_out, ' out'),
    chart(month, u.days),
    h('h2', {}, 'Costliest runs'),
    u.costliest.length ? h('ol', { id: 'costliest' }, u.costliest.map((c) => h('li', {},
      h('a', { href: '#/runs/' + c.id }, c.id.slice(0, 8)), ' ', c.template, ' ', status(c.status), ' ',
      usd(c.spent_usd_micros)))) : h('p', { class: 'muted' }, 'No run spent anything this month.'));
}
