// The dashboard: hash routes (#/login, #/projects/ID, #/runs/ID,
// #/approvals), each a view that fills <main>.
import { h, clear, append, usd, when, duration, status } from './dom.js';
import * as api from './api.js';
import { runView } from './run.js';
import { usageView } from './usage.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
export const state = { me: null };
let leaving = [];

export function onLeave(fn) { leaving.push(fn); }

function go(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

function failure(err) {
  return h('p', { class: 'error', role: 'alert' }, String(err && err.message || err));
}

function signInAgain(why) {
  state.me = null;
  for (const fn of leaving) fn();
  leaving = [];
  clear(nav);
  clear(main).append(loginForm(why));
}

function loginForm(why) {
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off', required: true,
    placeholder: 'agr_…', 'aria-label': 'API token' });
  const msg = h('p', { class: 'error', role: 'alert' });
  // method=post and no name on the input: even without this handler the
  // token could not end up in a URL
  const form = h('form', { method: 'post', action: '#', class: 'login', onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api.login(input.value.trim());
      input.value = '';
      await boot();
    } catch (err) {
      msg.textContent = err.status === 401 ? 'That token is not valid.' : err.message;
    }
  } },
  h('h1', {}, 'Sign in'),
  why ? h('p', { class: 'notice', id: 'signin-again' }, why) : null,
  h('label', { for: 'token' }, 'API token'), input,
  h('button', { type: 'submit' }, 'Sign in'), msg,
  h('p', { class: 'muted' }, 'The token is exchanged for a session cookie and not kept by the page.'));
  return form;
}

function navBar() {
  clear(nav);
  append(nav, [
    ...state.me.projects.map((p) => h('a', { href: '#/projects/' + p.id }, p.name)),
    h('a', { href: '#/approvals', id: 'nav-approvals' }, 'Approvals'),
    h('a', { href: '#/templates', id: 'nav-templates' }, 'Templates'),
    h('span', { class: 'who' }, state.me.name),
    h('button', { class: 'link', id: 'logout', onclick: async () => {
      await api.logout().catch(() => {});
      signInAgain('You signed out.');
    } }, 'Sign out'),
  ]);
}

export function roleIn(projectId) {
  const p = state.me && state.me.projects.find((x) => x.id === projectId);
  return p ? p.role : null;
}

function cost(run) {
  const spent = run.spent_usd_micros || 0;
  if (!run.budget_usd_micros) return h('span', {}, usd(spent));
  return h('span', { class: 'cost' }, usd(spent), ' / ', usd(run.budget_usd_micros), ' ',
    h('meter', { min: 0, max: run.budget_usd_micros, value: Math.min(spent, run.budget_usd_micros),
      high: run.budget_usd_micros * 0.8, title: 'spent of budget' }));
}

function prLink(pr) {
  if (!pr || !pr.url || !/^https?:\/\//.test(pr.url)) return pr && pr.branch ? pr.branch : '';
  return h('a', { href: pr.url, rel: 'noopener noreferrer', target: '_blank' }, '#' + pr.number);
}

// A date input's value (YYYY-MM-DD) as the local midnight starting that
// day, or plus days; null for none.
function day(v, plus) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(v);
  return m ? new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3]) + plus) : null;
}

const STATUSES = ['', 'queued', 'running', 'waiting_approval', 'succeeded', 'failed', 'cancelled'];

async function projectView(pid) {
  const project = state.me.projects.find((p) => p.id === pid);
  if (!project) { clear(main).append(failure('No such project.')); return; }
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const fStatus = h('select', { id: 'f-status' }, STATUSES.map((s) =>
    h('option', { value: s, selected: s === (params.get('status') || '') }, s || 'any status')));
  const fTmpl = h('input', { id: 'f-template', placeholder: 'template', value: params.get('template') || '' });
  const fSince = h('input', { id: 'f-since', type: 'date', value: params.get('since') || '' });
  const fUntil = h('input', { id: 'f-until', type: 'date', value: params.get('until') || '' });
  const body = h('tbody', { id: 'runs' });
  const more = h('button', { id: 'more', hidden: true }, 'More');
  const msg = h('div');
  let cursor = null;
  // The API filters by status and template; the days (in the page's time
  // zone, as it shows times) are filtered here, over its pages, which come
  // newest first: a run created before the first day ends the list.
  async function load(reset) {
    const since = day(fSince.value, 0);
    const until = day(fUntil.value, 1);
    clear(msg);
    if (since && until && since >= until) { msg.append(failure('The first day is after the last.')); return; }
    body.querySelector('tr.none')?.remove();
    if (reset) {
      clear(body);
      cursor = null;
      history.replaceState(null, '', `#/projects/${pid}` + api.qs({ status: fStatus.value,
        template: fTmpl.value.trim(), since: fSince.value, until: fUntil.value }));
    }
    try {
      let added = 0;
      let pages = 0;
      do {
        const r = await api.get(`/v1/projects/${pid}/runs` + api.qs({ status: fStatus.value,
          template: fTmpl.value.trim(), cursor, limit: 25 }));
        let stop = false;
        for (const run of r.runs) {
          const at = new Date(run.created_at);
          if (since && at < since) { stop = true; break; }
          if (until && at >= until) continue;
          body.append(runRow(run));
          added++;
        }
        cursor = stop ? null : r.next_cursor;
        pages++;
      } while (cursor && added < 25 && pages < 20);
      more.hidden = !cursor;
      if (!body.firstChild) body.append(h('tr', { class: 'none' }, h('td', { colspan: 8, class: 'muted' }, 'No runs.')));
    } catch (err) { msg.append(failure(err)); }
  }
  more.addEventListener('click', () => load(false));
  const filter = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); load(true); } },
    fStatus, fTmpl, h('label', { title: 'created on or after this day' }, 'from ', fSince),
    h('label', { title: 'created on or before this day' }, 'to ', fUntil), h('button', { type: 'submit' }, 'Filter'));
  clear(main).append(h('h1', {}, 'Runs of ', project.name, ' ',
    h('a', { href: `#/projects/${pid}/usage`, id: 'usage-link', class: 'small' }, 'usage')), filter, msg,
    h('table', { class: 'runs' }, h('thead', {}, h('tr', {},
      ['Run', 'Status', 'Template', 'Ref', 'Started', 'Duration', 'Cost', 'PR'].map((c) => h('th', {}, c)))), body),
    more);
  await load(true);
}

function runRow(run) {
  return h('tr', { 'data-run': run.id },
    h('td', {}, h('a', { href: '#/runs/' + run.id }, run.id.slice(0, 8))),
    h('td', {}, status(run.status)),
    h('td', {}, run.template ? run.template.name + ' v' + run.template.version : ''),
    h('td', { class: 'mono' }, run.checked_out_ref || run.ref || '—'),
    h('td', {}, when(run.started_at || run.created_at)),
    h('td', {}, duration(run.started_at, run.finished_at)),
    h('td', {}, cost(run)),
    h('td', {}, prLink(run.pull_request)));
}

async function approvalsView() {
  const list = h('ul', { id: 'inbox', class: 'inbox' });
  clear(main).append(h('h1', {}, 'Approvals waiting for you'), list);
  const r = await api.get('/v1/approvals');
  for (const ap of r.approvals) {
    list.append(h('li', { 'data-approval': ap.id },
      h('a', { href: '#/runs/' + ap.run_id }, ap.project.name, ' · ', ap.template, ' · ', ap.run_id.slice(0, 8)),
      ' ', h('span', { class: 'kind' }, ap.kind), ' at ', ap.step_id,
      ap.message ? [': ', h('span', { class: 'message' }, ap.message)] : null,
      h('span', { class: 'muted' }, ' · expires ', when(ap.expires_at))));
  }
  if (!r.approvals.length) list.append(h('li', { class: 'muted' }, 'Nothing waits for a decision.'));
}

async function templatesView(name) {
  if (name) {
    const t = await api.get('/v1/templates/' + encodeURIComponent(name));
    clear(main).append(h('h1', {}, 'Template ', t.name, ' v', t.version),
      t.description ? h('p', {}, t.description) : null,
      h('p', { class: 'muted' }, 'Loaded ', when(t.loaded_at), ' · sha256 ', h('span', { class: 'mono' }, t.sha256)),
      h('h2', {}, 'Compiled form'), h('pre', { class: 'text', id: 'compiled' }, JSON.stringify(t.template, null, 2)));
    return;
  }
  const r = await api.get('/v1/templates');
  clear(main).append(h('h1', {}, 'Templates'), h('table', { id: 'templates' },
    h('thead', {}, h('tr', {}, ['Name', 'Version', 'Description', 'Loaded'].map((c) => h('th', {}, c)))),
    h('tbody', {}, r.templates.map((t) => h('tr', {},
      h('td', {}, h('a', { href: '#/templates/' + t.name }, t.name)), h('td', {}, t.version),
      h('td', {}, t.description || ''), h('td', {}, when(t.loaded_at)))))));
}

async function route() {
  for (const fn of leaving) fn();
  leaving = [];
  if (!state.me) return;
  const [path] = location.hash.slice(1).split('?');
  const parts = path.split('/').filter(Boolean);
  try {
    const project = parts[0] === 'projects' && state.me.projects.find((p) => p.id === parts[1]);
    if (project && parts[2] === 'usage') await usageView(main, project);
    else if (parts[0] === 'projects' && parts[1]) await projectView(parts[1]);
    else if (parts[0] === 'runs' && parts[1]) await runView(main, parts[1]);
    else if (parts[0] === 'approvals') await approvalsView();
    else if (parts[0] === 'templates') await templatesView(parts[1]);
    else if (state.me.projects.length) go('#/projects/' + state.me.projects[0].id);
    else clear(main).append(h('p', {}, 'You are not a member of any project yet.'));
  } catch (err) {
    if (err.status !== 401) clear(main).append(failure(err));
  }
}

async function boot() {
  if (!(await api.resume())) { signInAgain(); return; }
  try {
    state.me = await api.get('/v1/me');
  } catch { signInAgain(); return; }
  navBar();
  await route();
}

api.signedOut(() => { if (state.me) signInAgain('Your session ended: sign in again.'); });
window.addEventListener('hashchange', route);
boot();
