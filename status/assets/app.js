// The breakwater status page: polls ./state and draws it. Every value from
// the server is inserted as text, never as markup.
'use strict';

(() => {
  const offsets = {}; // "<source index>.<table>" -> first row shown
  let filter = '';
  let timer = 0;
  let refresh = 1;
  let busy = false;
  let again = false; // a poll was asked for while one was under way

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'onclick') e.addEventListener('click', v);
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  // duration formats seconds as "850ms", "4.2s", "3m 5s" or "2h 10m".
  function duration(sec) {
    if (!(sec > 0)) return '0s';
    if (sec < 1) return Math.round(sec * 1000) + 'ms';
    if (sec < 60) return (Math.round(sec * 10) / 10) + 's';
    if (sec < 3600) return Math.floor(sec / 60) + 'm ' + Math.round(sec % 60) + 's';
    return Math.floor(sec / 3600) + 'h ' + Math.round((sec % 3600) / 60) + 'm';
  }

  // ago formats the time since an RFC 3339 timestamp, measured against the
  // server's clock (now), so that a skewed browser clock does not matter.
  function ago(ts, now) {
    if (!ts) return '';
    const d = (Date.parse(now) - Date.parse(ts)) / 1000;
    return Number.isFinite(d) ? duration(Math.max(0, d)) + ' ago' : '';
  }

  const stateLabel = { closed: 'closed', half_open: 'half-open', open: 'open', critical_shed: 'shedding critical requests', deadline_shed: "shedding for callers' deadlines" };

  function pill(state) {
    return el('span', { class: 'pill ' + state }, stateLabel[state] || state);
  }

  async function control(source, action, key) {
    try {
      const r = await fetch('control', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Breakwater-Control': '1' },
        body: JSON.stringify({ source, action, key }),
      });
      if (!r.ok) setConn(false, 'control refused: ' + (await r.text()).trim());
    } catch (e) {
      setConn(false, 'control failed: ' + e.message);
    }
    poll();
  }

  function button(label, source, action, key) {
    return el('button', { type: 'button', class: 'ctl ' + action, title: label + ' ' + key, onclick: () => control(source, action, key) }, label);
  }

  // pager shows which rows a table holds, with buttons to move by a page.
  function pager(id, t, limit) {
    const first = t.rows.length ? t.offset + 1 : 0;
    const last = t.offset + t.rows.length;
    const wrap = el('div', { class: 'pager' },
      `${first}–${last} of ${t.matched}` + (t.matched !== t.total ? ` matching (${t.total} keys)` : ' keys'));
    if (t.matched > limit) {
      const go = (to) => { offsets[id] = Math.max(0, to); poll(); };
      wrap.append(' ',
        el('button', { type: 'button', disabled: t.offset === 0 ? 'disabled' : null, onclick: () => go(t.offset - limit) }, '‹ previous'),
        el('button', { type: 'button', disabled: last >= t.matched ? 'disabled' : null, onclick: () => go(t.offset + limit) }, 'next ›'));
    }
    return wrap;
  }

  function tableOf(id, caption, t, headers, row, limit, empty) {
    if (!t) return null; // the source holds no such component
    const section = el('div', { class: 'table', 'data-table': id.split('.')[1] });
    const counts = Object.entries(t.counts || {}).map(([k, v]) => `${v} ${stateLabel[k] || k}`).join(', ');
    section.append(el('h3', {}, caption, counts ? el('span', { class: 'muted' }, ' · ' + counts) : null));
    if (!t.total) {
      section.append(el('p', { class: 'muted' }, empty));
      return section;
    }
    const body = el('tbody');
    for (const r of t.rows) body.append(row(r));
    section.append(el('table', {}, el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', { scope: 'col' }, h)))), body));
    section.append(pager(id, t, limit));
    return section;
  }

  function threshold(b) {
    const n = b.failures || 0;
    if (!b.threshold) return String(n);
    const pct = Math.min(100, Math.round((100 * n) / b.threshold));
    return el('span', { class: 'meter', title: `${n} of the ${b.threshold} failures that open it` },
      el('span', { class: 'bar' }, el('span', { class: 'fill', 'data-pct': pct })), ` ${n} / ${b.threshold}`);
  }

  const reasons = {
    failures: 'opened on failures',
    probe_failed: 'a probe failed',
    open_elapsed: 'open time elapsed',
    probes_succeeded: 'probes succeeded',
    trip: 'tripped by hand',
    reset: 'reset by hand',
    recovery_signal: 'a recovery signal',
    cluster: 'set by another replica',
  };

  // failures is what a breaker's failures cell says: the count against its
  // threshold while closed, the count that opened it otherwise.
  function failures(b) {
    if (b.state === 'closed') return threshold(b);
    if (b.opened_on) return el('span', { title: `the ${b.opened_on} failures that opened it; ${b.threshold} open it` }, `opened on ${b.opened_on} / ${b.threshold}`);
    return 'none: forced open';
  }

  function why(b) {
    const parts = [];
    if (b.reason) parts.push(reasons[b.reason] || b.reason.replace(/_/g, ' '));
    if (b.last_failure) parts.push('last failure: ' + b.last_failure.replace(/_/g, ' '));
    return parts.join('; ');
  }

  function breakerRow(src, s, now) {
    return (b) => el('tr', { 'data-key': b.key, 'data-state': b.state },
      el('td', { class: 'key' }, b.key),
      el('td', {}, pill(b.state)),
      el('td', {}, ago(b.since, now)),
      el('td', { class: 'why' }, why(b)),
      el('td', {}, failures(b)),
      el('td', {}, b.state === 'open' ? duration(b.remaining_seconds) : b.state === 'half_open' ? ramp(b) : ''),
      el('td', { class: 'num' }, b.opens || ''),
      s.controls && src.can_trip ? el('td', { class: 'ctls' },
        b.state !== 'open' ? button('trip', src.name, 'trip', b.key) : null,
        b.state !== 'closed' ? button('reset', src.name, 'reset', b.key) : null) : null);
  }

  // ramp is a half-open breaker's probes: in flight of those its ramp
  // allows now (doubling per success), and the successes so far.
  function ramp(b) {
    return el('span', { class: 'ramp', title: 'probes in flight of those allowed at once; each success doubles them' },
      `${b.probes_in_flight} of ${b.probes_allowed || 1} probing, ${b.probe_successes} ok`);
  }

  // pace is a paced key's learned rate, and whether it is still in slow
  // start or held near its ceiling.
  function pace(p) {
    if (!p.paced) return '';
    const rate = (r) => (r >= 10 ? r.toFixed(0) : r.toFixed(1)) + '/s';
    const phase = p.pace_phase === 'ceiling' ? `at its ceiling (${rate(p.pace_ceiling)})` : 'slow start';
    return el('span', { class: 'pace', 'data-phase': p.pace_phase, title: 'the rate its 429s taught: requests go no faster' }, `${rate(p.pace_rate)}, ${phase}`);
  }

  function pauseRow(src, s) {
    return (p) => el('tr', { 'data-key': p.key, 'data-paused': p.paused ? 'true' : 'false', 'data-paced': p.paced ? 'true' : 'false' },
      el('td', { class: 'key' }, p.key),
      el('td', {}, p.paused ? el('span', { class: 'pill paused' }, 'paused') : 'no'),
      el('td', {}, p.paused ? duration(p.remaining_seconds) : ''),
      el('td', {}, pace(p)),
      s.controls && src.can_resume ? el('td', { class: 'ctls' }, p.paused ? button('resume', src.name, 'resume', p.key) : null) : null);
  }

  function bucketRow(b) {
    return el('tr', { 'data-key': b.key },
      el('td', { class: 'key' }, b.key),
      el('td', { class: 'num' }, `${Math.max(0, Math.floor(b.tokens))} / ${b.burst}`),
      el('td', { class: 'num' }, b.limit_per_second),
      el('td', {}, b.limited ? el('span', { class: 'pill limited' }, 'limited') : 'no'),
      el('td', {}, b.limited ? duration(b.retry_after_seconds) : ''));
  }

  function bulkheadRow(b) {
    return el('tr', { 'data-key': b.key },
      el('td', { class: 'key' }, b.key),
      el('td', { class: 'num' }, `${b.in_flight} / ${b.limit}`),
      el('td', { class: 'num' }, b.queued),
      el('td', {}, b.saturated ? el('span', { class: 'pill limited' }, 'full') : 'no'));
  }

  // crit formats counts by criticality: "critical / default / sheddable".
  function crit(c) {
    return `${c.critical} / ${c.default} / ${c.sheddable}`;
  }

  function fleetRow(r) {
    return el('tr', { 'data-key': r.key },
      el('td', { class: 'key' }, r.key),
      el('td', { class: 'num' }, crit(r.shed)),
      el('td', { class: 'num' }, crit(r.late)),
      el('td', { class: 'num' }, r.pushback_elsewhere),
      el('td', { class: 'num' }, r.pushback_none),
      el('td', { class: 'num' }, r.pushback_honoured));
  }

  function insightsOf(src) {
    if (!src.insights && !src.insights_off) return null; // the source cannot have any
    const box = el('div', { class: 'insights' }, el('h3', {}, 'insights'));
    const list = src.insights || [];
    if (!list.length) {
      box.append(el('p', { class: 'muted' }, src.insights ? 'No finding: the counters of the last 5 minutes show nothing unusual.' : 'Insights are off: breakwater.WithInsights(true) on the transport turns them on.'));
      return box;
    }
    const ul = el('ul');
    for (const i of list) ul.append(el('li', { class: 'insight ' + (i.severity || ''), 'data-check': i.check }, el('strong', {}, i.key ? i.key + ': ' : ''), i.message));
    box.append(ul);
    return box;
  }

  function sourceOf(src, i, s) {
    const pageSize = s.limit || 50;
    const id = (t) => `${i}.${t}`;
    const state = el('div', { class: 'state' },
      tableOf(id('breakers'), 'breakers', src.breakers,
        ['key', 'state', 'since', 'why', 'failures', 'to half-open', 'opens', ...(s.controls && src.can_trip ? [''] : [])],
        breakerRow(src, s, s.at), pageSize, 'No breaker yet: keys appear with their first call.'),
      tableOf(id('pauses'), 'pauses', src.pauses, ['key', 'paused', 'remaining', 'learned rate', ...(s.controls && src.can_resume ? [''] : [])],
        pauseRow(src, s), pageSize, 'No pause: no upstream has asked to slow down.'),
      tableOf(id('buckets'), 'token buckets', src.buckets, ['key', 'tokens', 'per second', 'limited', 'next token'],
        bucketRow, pageSize, 'No token bucket.'),
      tableOf(id('bulkheads'), 'bulkheads', src.bulkheads, ['key', 'in flight', 'queued', 'full'],
        bulkheadRow, pageSize, 'No bulkhead.'),
      tableOf(id('fleet'), 'fleet', src.fleet,
        ['key', 'shed (critical / default / sheddable)', "of them for the caller's deadline", 'pushback sent: elsewhere', 'pushback sent: none', 'pushback honoured'],
        fleetRow, pageSize, 'Nothing shed, no pushback sent or honoured yet.'));
    if (!state.children.length) state.append(el('p', { class: 'muted' }, 'Nothing held yet: this source shows no breaker, pause, token bucket or bulkhead.'));
    const grid = el('div', { class: 'grid' }, state);
    if (src.explain) grid.append(el('aside', { class: 'explain' }, el('h3', {}, 'configuration'), el('pre', {}, src.explain)));
    return el('section', { class: 'source', 'data-source': src.name }, el('h2', {}, src.name), grid, insightsOf(src));
  }

  // stale says, at the head of the page, that what it shows may no longer
  // be true.
  function stale() {
    const t = document.getElementById('trouble');
    if (t.querySelector('.stale')) return;
    const at = document.body.dataset.updated;
    t.prepend(el('p', { class: 'stale' }, 'Not updating: what this page shows is from ' + (at ? new Date(at).toLocaleTimeString() : 'before it loaded') + ', and may no longer be true.'));
  }

  function setConn(ok, message) {
    const c = document.getElementById('conn');
    c.className = 'conn ' + (ok ? 'ok' : 'down');
    c.textContent = ok ? '' : message || 'not updating';
  }

  const troubleWords = {
    breaker_open: 'open breaker', breaker_half_open: 'half-open breaker', paused: 'pause',
    retry_budget_spent: 'spent retry budget', bulkhead_saturated: 'full bulkhead',
  };
  const troubleOrder = Object.keys(troubleWords);

  // troubleOf draws the head of the page: every key in trouble, worst
  // first, or that there is none.
  function troubleOf(s) {
    const t = s.trouble || { counts: {}, total: 0, rows: [], findings: 0 };
    const box = el('section', { id: 'trouble', 'data-total': t.total });
    const none = 'no breaker open or half-open, no pause, no retry budget spent, no bulkhead full';
    const findings = t.findings ? `${t.findings} ${t.findings === 1 ? 'insight' : 'insights'} below` : '';
    if (!s.sources.length) {
      box.append(el('p', { class: 'muted' }, 'No source: give status.New a status.Source.'));
      return box;
    }
    if (!t.total) {
      box.className = findings ? 'calm' : 'ok';
      box.append(el('p', {}, findings ? `No trouble now (${none}); ${findings}.` : `Nothing to report: ${none}, no insight.`));
      return box;
    }
    box.className = 'bad';
    const counts = troubleOrder.filter((k) => t.counts[k]).map((k) => `${t.counts[k]} ${troubleWords[k]}${t.counts[k] === 1 ? '' : 's'}`);
    box.append(el('h2', {}, 'trouble', el('span', { class: 'muted' }, ' · ' + counts.join(', ') + (findings ? '; ' + findings : ''))));
    const ol = el('ol');
    for (const r of t.rows) {
      ol.append(el('li', { class: 'trouble ' + r.kind, 'data-kind': r.kind, 'data-source': r.source, 'data-key': r.key },
        el('span', { class: 'pill ' + r.kind }, r.what), ' ', el('span', { class: 'key' }, r.key),
        s.sources.length > 1 || s.sources[0].name !== r.source ? el('span', { class: 'muted' }, ' in ' + r.source) : null,
        ': ', r.detail));
    }
    box.append(ol);
    if (t.total > t.rows.length) box.append(el('p', { class: 'muted' }, `and ${t.total - t.rows.length} more, in the tables below`));
    return box;
  }

  function render(s) {
    document.getElementById('title').textContent = s.title;
    document.title = s.title + ' status';
    document.getElementById('updated').textContent = 'updated ' + new Date(s.at).toLocaleTimeString() + `, every ${duration(s.refresh_seconds)}`;
    document.getElementById('trouble').replaceWith(troubleOf(s));
    const main = document.getElementById('sources');
    main.replaceChildren(...s.sources.map((src, i) => sourceOf(src, i, s)));
    for (const f of main.querySelectorAll('.fill')) f.style.width = f.dataset.pct + '%';
    document.body.dataset.updated = s.at;
  }

  async function poll() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    clearTimeout(timer);
    const params = new URLSearchParams();
    if (filter) params.set('q', filter);
    for (const [k, v] of Object.entries(offsets)) if (v > 0) params.append('o', `${k}.${v}`);
    try {
      const r = await fetch('state?' + params, { cache: 'no-store', headers: { Accept: 'application/json' } });
      if (!r.ok) throw new Error('state answered ' + r.status);
      const s = await r.json();
      refresh = s.refresh_seconds || 1;
      render(s);
      setConn(true);
    } catch (e) {
      setConn(false, 'not updating: ' + e.message);
      stale();
    } finally {
      busy = false;
      timer = setTimeout(poll, again ? 0 : refresh * 1000);
      again = false;
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    const q = document.getElementById('q');
    q.addEventListener('input', () => {
      filter = q.value.trim();
      for (const k of Object.keys(offsets)) offsets[k] = 0;
      poll();
    });
    poll();
  });
})();
