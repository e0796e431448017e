// The dashboard's benchmark in a real browser (bench/ui/run.sh starts the
// daemon and makes the runs): Debian's chromium driven by the
// playwright-core that tests/browser's lockfile pins.  Writes its samples
// to files in OUT, one figure a line, for run.sh to tabulate:
//   weight          one line per file the UI loaded: "path raw_bytes gzip_bytes"
//   load.page       ms from navigation to the run page showing its first
//                   1,000 events (painted), one line per sample
//   load.dom        the same to the 1,000th event's insertion into the DOM
//   load.peer       ms from a plain HTTP client's request (Node's fetch,
//                   the bearer token) to its 1,000th event of the same stream
//   delay.page      per tick event: ms from its append (clock_timestamp()
//                   in the appending transaction, in the payload) to the
//                   page painting it
//   delay.dom       the same to its insertion into the DOM (MutationObserver)
//   delay.peer      the same to its arrival at Node's fetch of the stream
// TIMELINE=1: print the request timings of each load sample.
//
// Environment: URL, TOKEN, RUN_BIG (a run holding >= 1,000 events), RUN_LIVE
// (a run parked at a checkpoint), TICKS (a shell command appending the tick
// events to RUN_LIVE), N (samples of the load), OUT.
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { performance } from 'node:perf_hooks';

const require = createRequire(new URL('../../tests/browser/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const env = process.env;
const URL_ = env.URL;
const N = Number(env.N || 7);
const OUT = env.OUT;
const wall = () => performance.timeOrigin + performance.now();
const put = (name, lines) => writeFileSync(`${OUT}/${name}`, lines.map((l) => l + '\n').join(''));

const launchArgs = ['--headless=new', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
// Chromium's own sandbox cannot run as root: only as root does it go without.
if (process.getuid() === 0) launchArgs.push('--no-sandbox');
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: launchArgs });

// In every document, before the page's own scripts: the time each event row
// (li[data-seq] in #events) is inserted, and the time after the frame that
// paints it (requestAnimationFrame, then a task: past style, layout, paint).
function observe() {
  const b = { dom: {}, painted: {}, count: 0, t1000dom: 0, t1000: 0 };
  window.__bench = b;
  const now = () => performance.timeOrigin + performance.now();
  new MutationObserver((muts) => {
    const t = now();
    const seqs = [];
    for (const m of muts) {
      for (const n of m.addedNodes) {
        if (n.nodeType !== 1) continue;
        const rows = n.matches('#events li[data-seq]') ? [n] : n.querySelectorAll('#events li[data-seq]');
        for (const li of rows) { b.dom[li.dataset.seq] = t; seqs.push(li.dataset.seq); }
      }
    }
    if (!seqs.length) return;
    b.count += seqs.length;
    const reached = b.count >= 1000 && !b.t1000dom;
    if (reached) b.t1000dom = performance.now();
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => {
        const p = now();
        for (const s of seqs) b.painted[s] = p;
        if (reached) b.t1000 = performance.now();
      };
      ch.port2.postMessage(0);
    });
  }).observe(document, { childList: true, subtree: true });
}

// Node's fetch of the run's stream: calls each(seq, data, arrival) until it
// returns true.
async function peerStream(run, each) {
  const ctrl = new AbortController();
  const res = await fetch(`${URL_}/v1/runs/${run}/events/stream`,
    { headers: { Authorization: `Bearer ${env.TOKEN}`, Accept: 'text/event-stream' }, signal: ctrl.signal });
  if (!res.ok) throw new Error('peer stream: HTTP ' + res.status);
  const dec = new TextDecoder();
  let buf = '';
  let id = null;
  let data = [];
  try {
    for await (const chunk of res.body) {
      const t = wall();
      buf += dec.decode(chunk, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line === '') {
          if (id !== null && each(Number(id), data.join('\n'), t)) return;
          id = null;
          data = [];
        } else if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
    }
  } finally {
    ctrl.abort();
  }
}

const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]; };
let errors = [];
try {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  await ctx.addInitScript(observe);
  const page = await ctx.newPage();
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));

  // ---- page weight: every file the UI loads on each of its views --------------------------
  const files = new Map();
  page.on('response', async (r) => {
    const u = new URL(r.url());
    if (u.origin !== URL_ || u.pathname.startsWith('/v1/') || u.pathname === '/healthz' || r.status() !== 200) return;
    try {
      const body = await r.body();
      const enc = (await r.allHeaders())['content-encoding'] || 'identity';
      files.set(u.pathname, { raw: body.length, gz: gzipSync(body, { level: 6 }).length, enc });
    } catch { /* a body the browser did not keep */ }
  });
  await page.goto(URL_ + '/');
  await page.waitForSelector('#token');
  await page.fill('#token', env.TOKEN);
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('#runs tr[data-run]');
  await page.goto(`${URL_}/#/runs/${env.RUN_LIVE}`);
  await page.waitForSelector('#events li');
  for (const [nav, sel] of [['#nav-approvals', '#inbox li'], ['#nav-templates', '#templates a']]) {
    await page.click(nav);
    await page.waitForSelector(sel);
  }
  await page.goto(`${URL_}/#/projects/${env.P1}/usage`);
  await page.waitForSelector('#spend-chart', { state: 'attached' });
  await page.waitForLoadState('networkidle');
  put('weight', [...files].sort().map(([p, f]) => `${p} ${f.raw} ${f.gz} ${f.enc}`));

  // ---- navigation to a run page showing its first 1,000 events ------------------------------
  const loadPage = [];
  const loadDom = [];
  const loadPeer = [];
  const peerLoad = async () => {
    const t0 = performance.now();
    let n = 0;
    await peerStream(env.RUN_BIG, () => ++n >= 1000);
    return performance.now() - t0;
  };
  for (let i = 0; i < N; i++) {
    if (i % 2) loadPeer.push(await peerLoad());
    await page.goto('about:blank');
    await page.goto(`${URL_}/#/runs/${env.RUN_BIG}`);
    await page.waitForFunction(() => window.__bench && window.__bench.t1000 > 0, null, { timeout: 60000 });
    const [t, td, n] = await page.evaluate(() => [window.__bench.t1000, window.__bench.t1000dom,
      document.querySelectorAll('#events li[data-seq]').length]);
    if (n < 1000) throw new Error(`the run page shows ${n} events`);
    if (env.TIMELINE) console.log(await page.evaluate(() => performance.getEntriesByType('resource').map((e) =>
      `${new URL(e.name).pathname} ${e.startTime.toFixed(0)}-${e.responseStart.toFixed(0)}-${e.responseEnd.toFixed(0)}`).join(' | ')));
    loadPage.push(t);
    loadDom.push(td);
    if (!(i % 2)) loadPeer.push(await peerLoad());
    console.log(`bench/ui: load sample ${i + 1}: page ${t.toFixed(1)} ms (DOM ${td.toFixed(1)} ms), ` +
      `peer ${loadPeer[loadPeer.length - 1].toFixed(1)} ms`);
  }
  put('load.page', loadPage.map((x) => x.toFixed(2)));
  put('load.dom', loadDom.map((x) => x.toFixed(2)));
  put('load.peer', loadPeer.map((x) => x.toFixed(2)));

  // ---- append -> page, over the tick events --------------------------------------------------
  await page.goto('about:blank');
  await page.goto(`${URL_}/#/runs/${env.RUN_LIVE}`);
  await page.waitForSelector('#events li');
  await page.waitForFunction(() => document.getElementById('live')?.textContent === 'live');
  const first = await page.evaluate(() => Math.max(...Object.keys(window.__bench.dom).map(Number)));
  const stamps = new Map(); // seq -> append time (ms since the epoch)
  const peerAt = new Map();
  let ticks = 0;
  const total = Number(env.NTICKS || 200);
  const peer = peerStream(env.RUN_LIVE, (seq, data, t) => {
    if (seq <= first) return false;
    const p = JSON.parse(data);
    const m = /^tick (\d+) ([0-9.]+)/.exec(p.text || '');
    if (m) { stamps.set(seq, Number(m[2])); peerAt.set(seq, t); ticks++; }
    return ticks >= total;
  });
  await new Promise((r) => setTimeout(r, 500)); // the peer has joined the stream
  const code = await new Promise((r) => spawn('sh', ['-c', env.TICKS], { stdio: 'inherit' }).on('exit', r));
  if (code !== 0) throw new Error('the tick command failed: ' + code);
  await peer;
  await page.waitForFunction((n) => Object.keys(window.__bench.painted).length >= n, first + total, { timeout: 30000 });
  const [dom, painted] = await page.evaluate(() => [window.__bench.dom, window.__bench.painted]);
  const dp = [];
  const dd = [];
  const dq = [];
  for (const [seq, t] of stamps) {
    if (dom[seq] === undefined || painted[seq] === undefined) throw new Error(`event ${seq} never reached the page`);
    dp.push((painted[seq] - t).toFixed(2));
    dd.push((dom[seq] - t).toFixed(2));
    dq.push((peerAt.get(seq) - t).toFixed(2));
  }
  put('delay.page', dp);
  put('delay.dom', dd);
  put('delay.peer', dq);
  console.log(`bench/ui: ${stamps.size} tick events: page p50 ${pct(dp.map(Number), 0.5)} ms, ` +
    `p99 ${pct(dp.map(Number), 0.99)} ms; peer p50 ${pct(dq.map(Number), 0.5)} ms`);
  const shown = await page.$$eval('#events li[data-seq]', (l) => l.map((x) => Number(x.dataset.seq)));
  if (!shown.every((s, i) => s === i + 1)) throw new Error('the run page shows the events out of order or twice');
} catch (e) {
  console.error('bench/ui: ' + (e && e.stack || e));
  process.exitCode = 1;
} finally {
  await browser.close();
}
if (errors.length) {
  console.error('bench/ui: console errors on the page: ' + errors.join(' | '));
  process.exitCode = 1;
}
