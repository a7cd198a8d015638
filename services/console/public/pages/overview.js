// Overview: transactions per minute, wallet latency (p50/p99) and failure share per operator, projection
// lag, what is not settled, and the chain's state; over the last hour or day, refreshed every 5 s.
// Charts are Chart.js 4 (its UMD build, served by the service at /console/vendor/chart.umd.js).
import { getJson, isAbort } from '../api.js';
import { age, count, duration, h, hhmm, notice, pageTitle, replaceChildren, table, utc } from '../dom.js';
import { href } from '../routes.js';

const REFRESH_MS = 5000;
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

/**
 * @typedef {{ at: string, count: number }} TxBucket
 * @typedef {{ at: string, calls: number, failures: number, p50Ms: number | null, p99Ms: number | null }} WalletBucket
 * @typedef {{ operatorId: string, buckets: WalletBucket[] }} WalletSeries
 * @typedef {{ name: string, eventsBehind: number, msBehind: number }} Lag
 * @typedef {{ linked: number, failing: string | null, signingLate: boolean, behind: number, lastCheckpointAt: string | null, lastCheckpointCount: number | null, keyId: string | null }} Chain
 * @typedef {{ window: 'hour' | 'day', bucketSeconds: number, generatedAt: string, transactions: TxBucket[], wallet: WalletSeries[],
 *   unsettled: { pending: number, failed: number, dead: number }, projections: Lag[], chain: Chain,
 *   lagHistory?: Array<{ name: string, buckets: Array<{ at: string, eventsBehind: number | null, msBehind: number | null }> }> }} Overview
 */

/** @returns {any} Chart.js's constructor, from the UMD build's global. */
function chartJs() {
  return /** @type {any} */ (globalThis).Chart;
}

/**
 * A chart in a figure with a caption; the canvas is an image whose label says what the latest bucket shows.
 * @param {string} id
 * @param {string} caption
 */
function chartFigure(id, caption) {
  const canvas = h('canvas', { id, role: 'img', 'aria-label': caption });
  const figure = h('figure', { class: 'chart card' }, h('figcaption', {}, caption), h('div', { class: 'chart-box' }, canvas));
  return { figure, canvas };
}

/** @param {number} i @param {string} [alpha] */
const color = (i, alpha = '') => `${PALETTE[i % PALETTE.length]}${alpha}`;

/** @param {import('../app.js').PageContext} ctx */
export async function overviewPage(ctx) {
  ctx.setTitle('Overview');
  /** @type {'hour' | 'day'} */
  let span = 'hour';
  let paused = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;

  const updated = h('p', { class: 'muted', id: 'overview-updated' }, 'Loading…');
  const problem = h('div', { id: 'overview-problem' });
  const hourButton = h('button', { type: 'button', 'aria-pressed': 'true', 'data-window': 'hour' }, 'Last hour');
  const dayButton = h('button', { type: 'button', 'aria-pressed': 'false', 'data-window': 'day' }, 'Last day');
  const pauseButton = h('button', { type: 'button', class: 'secondary', 'aria-pressed': 'false' }, 'Pause live updates');
  const tiles = h('section', { class: 'tiles', 'aria-label': 'Current state' });
  const lagTable = h('div', { class: 'lag-table' });

  const charts = {
    tx: chartFigure('chart-transactions', 'Transactions per minute'),
    latency: chartFigure('chart-latency', 'Wallet latency per operator (p50 solid, p99 dashed), ms'),
    failures: chartFigure('chart-failures', 'Wallet failure share per operator, % of calls'),
    lag: chartFigure('chart-lag', 'Projection lag, events behind (most in each interval)'),
  };

  ctx.main.append(
    pageTitle('Overview'),
    h(
      'div',
      { class: 'toolbar' },
      h('div', { role: 'group', 'aria-label': 'Time window', class: 'segmented' }, hourButton, dayButton),
      pauseButton,
      updated,
    ),
    problem,
    tiles,
    h('section', { class: 'charts', 'aria-label': 'Charts' }, charts.tx.figure, charts.latency.figure, charts.failures.figure, charts.lag.figure),
    lagTable,
  );

  const Chart = chartJs();
  if (!Chart) {
    replaceChildren(problem, notice('The charting library did not load (/console/vendor/chart.umd.js). Is chart.js installed (npm ci)?', 'error'));
    return;
  }
  const common = {
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    interaction: { mode: 'index', intersect: false },
    plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 } } },
  };
  /** @type {any[]} */
  const instances = [];
  /** @param {HTMLCanvasElement} canvas @param {object} config */
  const make = (canvas, config) => {
    const chart = new Chart(canvas, config);
    instances.push(chart);
    return chart;
  };
  const txChart = make(charts.tx.canvas, {
    type: 'bar',
    data: { labels: [], datasets: [{ label: 'transactions / min', data: [], backgroundColor: color(0, 'cc') }] },
    options: { ...common, plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true, title: { display: true, text: 'per minute' } } } },
  });
  const latencyChart = make(charts.latency.canvas, {
    type: 'line',
    data: { labels: [], datasets: [] },
    options: { ...common, spanGaps: false, scales: { y: { beginAtZero: true, title: { display: true, text: 'ms' } } } },
  });
  const failureChart = make(charts.failures.canvas, {
    type: 'line',
    data: { labels: [], datasets: [] },
    options: { ...common, scales: { y: { beginAtZero: true, suggestedMax: 100, title: { display: true, text: '% failed' } } } },
  });
  const lagChart = make(charts.lag.canvas, {
    type: 'line',
    data: { labels: [], datasets: [] },
    options: { ...common, scales: { y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: 'events behind' } } } },
  });

  ctx.onDispose(() => {
    clearTimeout(timer);
    for (const chart of instances) chart.destroy();
  });

  /** @param {Overview} o */
  function draw(o) {
    const labels = o.transactions.map((b) => hhmm(b.at));
    const perMinute = 60 / o.bucketSeconds;
    txChart.data.labels = labels;
    txChart.data.datasets[0].data = o.transactions.map((b) => Math.round(b.count * perMinute * 100) / 100);
    txChart.update('none');
    const lastTx = o.transactions.at(-1);
    charts.tx.canvas.setAttribute('aria-label', `Transactions per minute over the last ${o.window}; latest bucket: ${lastTx ? count(lastTx.count * perMinute) : 0}`);

    latencyChart.data.labels = labels;
    latencyChart.data.datasets = o.wallet.flatMap((w, i) => [
      { label: `${w.operatorId} p50`, data: w.buckets.map((b) => b.p50Ms), borderColor: color(i), backgroundColor: color(i), pointRadius: 2 },
      { label: `${w.operatorId} p99`, data: w.buckets.map((b) => b.p99Ms), borderColor: color(i), backgroundColor: color(i), borderDash: [6, 4], pointRadius: 2 },
    ]);
    latencyChart.update('none');
    charts.latency.canvas.setAttribute(
      'aria-label',
      `Wallet latency per operator: ${o.wallet.map((w) => { const b = [...w.buckets].reverse().find((x) => x.calls > 0); return `${w.operatorId} p50 ${duration(b?.p50Ms)}, p99 ${duration(b?.p99Ms)}`; }).join('; ') || 'no wallet calls'}`,
    );

    failureChart.data.labels = labels;
    failureChart.data.datasets = o.wallet.map((w, i) => ({
      label: w.operatorId,
      data: w.buckets.map((b) => (b.calls > 0 ? Math.round((b.failures / b.calls) * 1000) / 10 : null)),
      borderColor: color(i),
      backgroundColor: color(i),
      pointRadius: 2,
    }));
    failureChart.update('none');
    charts.failures.canvas.setAttribute(
      'aria-label',
      `Wallet failure share per operator over the last ${o.window}: ${o.wallet.map((w) => { const calls = w.buckets.reduce((s, b) => s + b.calls, 0); const failed = w.buckets.reduce((s, b) => s + b.failures, 0); return `${w.operatorId} ${calls ? ((failed / calls) * 100).toFixed(1) : '0'} % of ${count(calls)} calls`; }).join('; ') || 'no wallet calls'}`,
    );

    lagChart.data.labels = labels;
    lagChart.data.datasets = (o.lagHistory ?? []).map((l, i) => ({
      label: l.name,
      data: l.buckets.map((b) => b.eventsBehind),
      borderColor: color(i),
      backgroundColor: color(i),
      pointRadius: 1,
    }));
    lagChart.update('none');
    charts.lag.canvas.setAttribute('aria-label', `Projection lag: ${o.projections.map((p) => `${p.name} ${p.eventsBehind} events behind`).join('; ')}`);
    replaceChildren(
      lagTable,
      table({ caption: 'Projection lag', headers: ['Projection', 'Events behind', 'Oldest unapplied'], rows: o.projections.map((p) => [p.name, count(p.eventsBehind), p.eventsBehind === 0 ? 'caught up' : age(p.msBehind / 1000)]) }),
    );

    const c = o.chain;
    replaceChildren(
      tiles,
      tile('Pending', count(o.unsettled.pending), 'sent, no final answer yet', href.stuck(), o.unsettled.pending > 0 ? 'warn' : 'ok'),
      tile('Failed', count(o.unsettled.failed), 'BETs the wallet never accepted, not rolled back yet', href.stuck(), o.unsettled.failed > 0 ? 'warn' : 'ok'),
      tile('Dead', count(o.unsettled.dead), 'retries stopped: re-drive or adjust', href.stuck(), o.unsettled.dead > 0 ? 'bad' : 'ok'),
      tile(
        'Hash chain',
        c.failing !== null ? 'stopped' : c.signingLate ? 'not signed' : c.behind === 0 ? 'up to date' : `${count(c.behind)} behind`,
        `${c.failing !== null ? `${c.failing}; ` : ''}${count(c.linked)} events linked; last checkpoint ${c.lastCheckpointAt ? `${utc(c.lastCheckpointAt)} (${count(c.lastCheckpointCount ?? 0)} events${c.keyId ? `, key ${c.keyId}` : ''})` : 'none yet'}`,
        undefined,
        c.failing !== null || c.signingLate ? 'bad' : c.behind === 0 ? 'ok' : 'warn',
      ),
    );
    updated.textContent = `Last ${o.window}, in ${o.bucketSeconds / 60}-minute buckets, times in UTC. Updated ${utc(o.generatedAt)}${paused ? ' (paused)' : '; refreshes every 5 s'}.`;
  }

  /** Refreshes started: only the latest draws and schedules the next (a click while one is under way starts another, and the answers may come back in either order). */
  let refreshes = 0;

  async function refresh() {
    clearTimeout(timer);
    const mine = ++refreshes;
    try {
      /** @type {Overview} */
      const o = await getJson(`/v1/admin/console/overview?window=${span}`, { signal: ctx.signal });
      // Superseded: its answer is of a window or a moment no longer asked for (the latest draws, and keeps the timer).
      if (ctx.signal.aborted || mine !== refreshes) return;
      draw(o);
      problem.replaceChildren();
    } catch (err) {
      if (isAbort(err) || ctx.signal.aborted || mine !== refreshes) return;
      replaceChildren(problem, notice(`Could not refresh: ${err instanceof Error ? err.message : String(err)}`, 'error'));
    }
    if (!paused && !ctx.signal.aborted) timer = setTimeout(refresh, REFRESH_MS);
  }

  /** @param {'hour' | 'day'} next */
  function choose(next) {
    span = next;
    hourButton.setAttribute('aria-pressed', String(next === 'hour'));
    dayButton.setAttribute('aria-pressed', String(next === 'day'));
    void refresh();
  }
  hourButton.addEventListener('click', () => choose('hour'));
  dayButton.addEventListener('click', () => choose('day'));
  pauseButton.addEventListener('click', () => {
    paused = !paused;
    pauseButton.setAttribute('aria-pressed', String(paused));
    pauseButton.textContent = paused ? 'Resume live updates' : 'Pause live updates';
    void refresh();
  });

  await refresh();
}

/**
 * @param {string} label
 * @param {string} value
 * @param {string} detail
 * @param {string | undefined} link
 * @param {'ok' | 'warn' | 'bad'} tone
 */
function tile(label, value, detail, link, tone) {
  const body = [h('span', { class: 'tile-label' }, label), h('span', { class: 'tile-value' }, value), h('span', { class: 'tile-detail' }, detail)];
  return h('div', { class: `tile tile-${tone}`, 'data-tile': label.toLowerCase().replace(/\s+/g, '-') }, link ? h('a', { href: link, class: 'tile-body' }, ...body) : h('div', { class: 'tile-body' }, ...body));
}
