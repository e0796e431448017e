// One run: summary, steps with attempts, the pending approval, the live
// event stream (replayed from the start, then tailed; EventSource resumes
// with Last-Event-ID after a drop), artifacts with the patch as a diff.
import { h, clear, append, usd, when, duration, status, longText } from './dom.js';
import * as api from './api.js';
import { onLeave, roleIn } from './app.js';
import { diffView } from './diff.js';
import { openStream } from './stream.js';

const TERMINAL = new Set(['run.succeeded', 'run.failed', 'run.cancelled']);

// One event as a row: what it says, as text.
function eventBody(type, p) {
  switch (type) {
  case 'step.output':
    return h('pre', { class: 'output ' + (p.stream === 'stderr' ? 'stderr' : 'stdout') }, p.text);
  case 'agent.message':
    return longText(p.text || '');
  case 'agent.tool_call':
    return h('div', {}, h('span', { class: 'tool' }, p.name), ' ', longText(p.input, 200));
  case 'agent.tool_result':
    return h('div', { class: p.is_error ? 'tool-error' : '' }, h('span', { class: 'tool' }, p.name, ' → '),
      longText(p.content || '', 200));
  case 'step.started': case 'step.finished': case 'step.crashed': case 'step.skipped':
    return h('span', {}, p.step_id || '', p.attempt ? ' #' + p.attempt : '', p.status ? ' ' + p.status : '',
      p.error ? ' — ' + p.error : '');
  case 'approval.requested':
    return h('span', {}, p.kind, ' at ', p.step_id, p.message ? ': ' + p.message : '');
  default:
    return longText(p, 300);
  }
}

function stepsTable(steps) {
  const byStep = new Map();
  for (const s of steps) {
    const k = s.phase + '/' + s.step_id;
    if (!byStep.has(k)) byStep.set(k, []);
    byStep.get(k).push(s);
  }
  const rows = [];
  for (const [k, attempts] of byStep) {
    const last = attempts[attempts.length - 1];
    rows.push(h('tr', { 'data-step': last.step_id },
      h('td', {}, last.phase), h('td', {}, last.step_id),
      h('td', {}, attempts.map((a) => h('span', { class: 'attempt', title: a.error || '' },
        '#' + a.attempt, ' ', status(a.status), ' ', duration(a.started_at, a.finished_at), ' '))),
      h('td', {}, last.exit_status ?? '')));
  }
  return h('table', { class: 'steps' }, h('thead', {}, h('tr', {},
    ['Phase', 'Step', 'Attempts', 'Exit'].map((c) => h('th', {}, c)))), h('tbody', {}, rows));
}

// An admin may raise the budget a run stopped on (which approves the
// approval and resumes the run): the run's, or the phase's when that was
// the one spent (ex: the run's last budget.exceeded).  A full monthly quota
// is not the run's budget: raising that would not help.
function budgetForm(run, ex, refresh, msg) {
  if (ex && ex.scope === 'quota') {
    return h('p', { class: 'muted', id: 'budget-quota' }, 'The project\'s monthly quota (', usd(ex.quota_usd_micros),
      ', ', usd(ex.month_spent_usd_micros), ' spent) cannot take this step: approve once it was raised.');
  }
  const phase = ex && ex.scope === 'phase' && typeof ex.phase === 'string' ? ex.phase : null;
  const cur = phase ? ex.budget_usd_micros : run.budget_usd_micros;
  const usdIn = h('input', { id: 'budget-usd', type: 'number', min: 0, max: 100000, step: '0.01', required: true,
    value: cur ? (cur * 2 / 1e6).toFixed(2) : '1.00' });
  return h('form', { class: 'budget', id: 'budget-form', onsubmit: async (e) => {
    e.preventDefault();
    const micros = Math.round(Number(usdIn.value) * 1e6);
    if (usdIn.value === '' || !Number.isSafeInteger(micros) || micros < 0 || micros > 1e11) {
      msg.textContent = 'A budget is from 0 to 100000 USD.';
      return;
    }
    try {
      await api.post(`/v1/runs/${run.id}/budget`, phase ? { phase, usd_micros: micros } : { usd_micros: micros });
      await refresh();
    } catch (err) { msg.textContent = err.message; }
  } },
  h('p', { id: 'budget-spent' }, 'Spent ', usd(ex ? ex.spent_usd_micros : run.spent_usd_micros), ' of ',
    usd(cur), phase ? [' (the budget of phase ', phase, ')'] : ' (the run\'s budget)'),
  h('label', { for: 'budget-usd' }, phase ? ['New budget of phase ', phase, ' (USD) '] : 'New run budget (USD) '),
  usdIn, ' ', h('button', { type: 'submit', id: 'raise' }, 'Raise and resume'));
}

function approvalPanel(ap, message, canDecide, refresh, run, isAdmin, exceeded) {
  const comment = h('textarea', { id: 'approval-comment', maxlength: 4096, placeholder: 'comment (optional)' });
  const msg = h('p', { class: 'error', role: 'alert' });
  const decide = (decision) => async () => {
    try {
      await api.post(`/v1/approvals/${ap.id}/decide`, { decision, comment: comment.value || undefined });
      await refresh();
    } catch (err) { msg.textContent = err.message; }
  };
  return h('section', { class: 'approval', id: 'approval' },
    h('h2', {}, 'Waiting for a decision (', ap.kind, ' at ', ap.step_id, ')'),
    h('p', { class: 'message', id: 'approval-message' }, message),
    h('p', { class: 'muted' }, 'Expires ', when(ap.expires_at)),
    canDecide ? [comment, h('div', { class: 'buttons' },
      h('button', { id: 'approve', onclick: decide('approved') }, 'Approve'),
      h('button', { id: 'reject', class: 'danger', onclick: decide('rejected') }, 'Reject'))]
      : h('p', { class: 'muted' }, 'Your role cannot decide it.'),
    ap.kind === 'budget' ? (isAdmin ? budgetForm(run, exceeded, refresh, msg)
      : h('p', { class: 'muted', id: 'budget-admin-only' }, 'An admin of the project may raise the budget.')) : null,
    msg);
}

async function artifactsList(runId) {
  const r = await api.get(`/v1/runs/${runId}/artifacts`);
  if (!r.artifacts.length) return h('p', { class: 'muted' }, 'No artifacts yet.');
  const list = h('ul', { class: 'artifacts', id: 'artifacts' });
  for (const a of r.artifacts) {
    const li = h('li', { 'data-artifact': a.id },
      h('span', { class: 'key' }, a.key), ' ', h('span', { class: 'kind' }, a.kind), ' ',
      a.size + ' bytes · step ', a.step_id, ' · ',
      h('a', { href: '/v1/artifacts/' + a.id, download: '' }, 'download'));
    list.append(li);
    if (a.kind === 'patch' && a.size <= 512 * 1024) {
      fetch('/v1/artifacts/' + a.id, { credentials: 'same-origin' })
        .then((res) => (res.ok ? res.text() : ''))
        .then((text) => { if (text) li.append(diffView(text)); });
    }
  }
  return list;
}

export async function runView(main, runId) {
  const summary = h('section', { id: 'summary' });
  const stepsBox = h('section', { id: 'steps' });
  const approvalBox = h('div');
  const artifactsBox = h('section', { id: 'artifacts-box' });
  const events = h('ol', { id: 'events', class: 'events' });
  const live = h('span', { id: 'live', class: 'muted' }, 'connecting…');
  let run = null;
  let lastSeq = 0;
  let message = '';
  let exceeded = null; // the last budget.exceeded
  clear(main).append(h('h1', {}, 'Run ', h('span', { class: 'mono' }, runId.slice(0, 8))), summary,
    approvalBox, h('h2', {}, 'Steps'), stepsBox, h('h2', {}, 'Artifacts'), artifactsBox,
    h('h2', {}, 'Events ', live), events);

  async function refresh() {
    run = await api.get('/v1/runs/' + runId);
    const role = roleIn(run.project_id);
    const canAct = role === 'member' || role === 'admin';
    const done = ['succeeded', 'failed', 'cancelled'].includes(run.status);
    append(clear(summary), [h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', { id: 'run-status' }, status(run.status)),
      h('dt', {}, 'Template'), h('dd', {}, run.template.name, ' v', run.template.version),
      h('dt', {}, 'Ref'), h('dd', { class: 'mono' }, run.checked_out_ref || run.ref || '—',
        run.base_commit ? ' @ ' + run.base_commit.slice(0, 12) : ''),
      h('dt', {}, 'Started'), h('dd', {}, when(run.started_at)),
      h('dt', {}, 'Duration'), h('dd', {}, duration(run.started_at, run.finished_at)),
      h('dt', {}, 'Spent'), h('dd', { id: 'spent' }, usd(run.spent_usd_micros), ' of ',
        run.budget_usd_micros === null ? 'no budget' : usd(run.budget_usd_micros),
        run.budget_usd_micros ? h('meter', { min: 0, max: run.budget_usd_micros,
          value: Math.min(run.spent_usd_micros, run.budget_usd_micros) }) : null),
      h('dt', {}, 'Parameters'), h('dd', { id: 'params' }, longText(run.params, 300)),
      run.error ? [h('dt', {}, 'Error'), h('dd', { class: 'error' }, run.error)] : null),
    canAct && !done ? h('button', { id: 'cancel', class: 'danger', onclick: async (e) => {
      e.target.disabled = true;
      try { await api.post(`/v1/runs/${runId}/cancel`); await refresh(); } catch (err) { alertText(err); }
    } }, 'Cancel run') : null]);
    const [steps, approvals, artifacts] = await Promise.all([api.get(`/v1/runs/${runId}/steps`),
      api.get(`/v1/runs/${runId}/approvals`), artifactsList(runId)]);
    clear(stepsBox).append(steps.steps.length ? stepsTable(steps.steps) : h('p', { class: 'muted' }, 'No step has started.'));
    const pending = approvals.approvals.find((a) => a.status === 'pending');
    clear(approvalBox);
    if (pending && !done) approvalBox.append(approvalPanel(pending, message, canAct, refresh, run, role === 'admin', exceeded));
    clear(artifactsBox).append(artifacts);
  }
  function alertText(err) { summary.append(h('p', { class: 'error' }, err.message)); }

  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(() => refresh().catch(() => {}), 250); };
  // The rows of one chunk of the stream go into the page at once (one
  // insertion, one layout), as soon as the chunk has been read.
  let rows = null;
  const flush = () => { events.append(rows); rows = null; };
  const onEvent = (type, seq, data) => {
    if (!(seq > lastSeq)) return null; // never twice, never out of order
    lastSeq = seq;
    let p = {};
    try { p = JSON.parse(data); } catch { p = { data }; }
    if (type === 'approval.requested') {
      message = p.message || '';
      const m = document.getElementById('approval-message');
      if (m) m.textContent = message;
    }
    if (type === 'budget.exceeded') exceeded = p;
    if (!rows) { rows = document.createDocumentFragment(); queueMicrotask(flush); }
    rows.append(h('li', { 'data-seq': seq, 'data-type': type, class: 'ev ev-' + type.split('.')[0] },
      h('span', { class: 'seq' }, seq), h('span', { class: 'type' }, type), eventBody(type, p)));
    if (type !== 'step.output' && !type.startsWith('agent.')) later();
    if (TERMINAL.has(type)) { live.textContent = 'finished'; return 'terminal'; }
    return null;
  };
  // the stream opens at once, beside the run's other requests
  const close = openStream(`/v1/runs/${runId}/events/stream`, {
    onEvent,
    onState: (t) => { if (live.textContent !== 'finished') live.textContent = t; },
    // a refused stream: is the session gone? (a 401 signs the page out)
    onRefused: () => { live.textContent = 'disconnected'; api.get('/v1/me').catch(() => {}); },
  });
  onLeave(() => { close(); clearTimeout(timer); });
  try { await refresh(); } catch (err) { close(); throw err; }
}
