// The run page's live log: polls the attempt's log once a second (Forgejo's
// 1 s cursor poll) while the job runs, places each line in its step, folds
// ::group:: sections and renders ANSI colours. Text reaches the page only
// through textContent and class names from a fixed list: a log line is
// attacker-controlled and is never parsed as HTML.
(function () {
  'use strict';
  const log = document.getElementById('log');
  if (!log) return;
  const url = log.dataset.url;
  let done = log.dataset.done === 'true';
  const startedDone = done;
  let offset = 0;
  let line = 0;
  /** Sections: the synthetic "Set up job", one per step, "Complete job". */
  const sections = new Map();
  let steps = [];

  log.textContent = '';

  function section(key, title) {
    let entry = sections.get(key);
    if (!entry) {
      const details = document.createElement('details');
      details.className = 'log-step';
      const summary = document.createElement('summary');
      const body = document.createElement('div');
      details.append(summary, body);
      entry = { details, summary, body, stack: [body] };
      sections.set(key, entry);
      // Keep the sections in step order: setup, the steps, complete.
      const order = ['setup', ...steps.map((_, i) => `step-${i}`), 'complete'];
      const mine = order.indexOf(key);
      const after = [...sections.entries()].find(([k]) => order.indexOf(k) > mine && k !== key);
      if (after) log.insertBefore(details, after[1].details);
      else log.append(details);
    }
    entry.summary.textContent = title;
    return entry;
  }

  function refreshSteps() {
    section('setup', 'Set up job');
    steps.forEach((step, i) => {
      const entry = section(`step-${i}`, `${step.name} · ${step.status}`);
      if (step.status === 'running' || step.status === 'failure') entry.details.open = true;
    });
  }

  const STARTED = new Set(['running', 'success', 'failure', 'cancelled']);
  /** The section of the n-th line (1-based), from the steps' line ranges. */
  function sectionOf(n) {
    const index = n - 1;
    let chosen = -1;
    steps.forEach((step, i) => {
      if (STARTED.has(step.status) && step.logIndex <= index) chosen = i;
    });
    if (chosen < 0) return section('setup', 'Set up job');
    const step = steps[chosen];
    const last = chosen === steps.length - 1;
    if (last && step.status !== 'running' && index >= step.logIndex + step.logLength)
      return section('complete', 'Complete job');
    return sections.get(`step-${chosen}`);
  }

  // ESC [ … m: the escape character is the point of these patterns.
  // eslint-disable-next-line no-control-regex
  const SGR = /\u001b\[([0-9;]*)m/g;
  // eslint-disable-next-line no-control-regex
  const OTHER_ESCAPES = /\u001b\[[0-9;?]*[A-Za-z]/g;
  const FG = new Set([30, 31, 32, 33, 34, 35, 36, 37, 90, 91, 92, 93, 94, 95, 96, 97]);
  const BG = new Set([41, 42, 43, 44]);

  /** Appends `text` to `parent` as spans whose classes follow the ANSI SGR codes. */
  function appendAnsi(parent, text) {
    const state = { bold: false, italic: false, underline: false, fg: 0, bg: 0 };
    let last = 0;
    const emit = (chunk) => {
      const clean = chunk.replace(OTHER_ESCAPES, '');
      if (clean === '') return;
      const classes = [];
      if (state.bold) classes.push('ansi-bold');
      if (state.italic) classes.push('ansi-italic');
      if (state.underline) classes.push('ansi-underline');
      if (state.fg) classes.push(`ansi-fg-${state.fg}`);
      if (state.bg) classes.push(`ansi-bg-${state.bg}`);
      if (classes.length === 0) {
        parent.append(document.createTextNode(clean));
        return;
      }
      const span = document.createElement('span');
      span.className = classes.join(' ');
      span.textContent = clean;
      parent.append(span);
    };
    for (const match of text.matchAll(SGR)) {
      emit(text.slice(last, match.index));
      last = match.index + match[0].length;
      const codes = match[1] === '' ? [0] : match[1].split(';').map(Number);
      for (const code of codes) {
        if (code === 0) Object.assign(state, { bold: false, italic: false, underline: false, fg: 0, bg: 0 });
        else if (code === 1) state.bold = true;
        else if (code === 3) state.italic = true;
        else if (code === 4) state.underline = true;
        else if (code === 22) state.bold = false;
        else if (code === 23) state.italic = false;
        else if (code === 24) state.underline = false;
        else if (code === 39) state.fg = 0;
        else if (code === 49) state.bg = 0;
        else if (FG.has(code)) state.fg = code;
        else if (BG.has(code)) state.bg = code;
      }
    }
    emit(text.slice(last));
  }

  function addLine(entry) {
    const target = sectionOf(entry.n);
    const text = entry.text;
    if (text.startsWith('::group::')) {
      const group = document.createElement('details');
      group.className = 'log-group';
      const summary = document.createElement('summary');
      summary.textContent = text.slice('::group::'.length);
      const body = document.createElement('div');
      group.append(summary, body);
      target.stack[target.stack.length - 1].append(group);
      target.stack.push(body);
      return;
    }
    if (text.startsWith('::endgroup::')) {
      if (target.stack.length > 1) target.stack.pop();
      return;
    }
    const row = document.createElement('div');
    row.className = 'log-line';
    const num = document.createElement('span');
    num.className = 'num';
    num.textContent = String(entry.n);
    const time = document.createElement('span');
    time.className = 'time';
    time.textContent = entry.time;
    const content = document.createElement('span');
    content.className = 'text';
    appendAnsi(content, text);
    row.append(num, time, content);
    target.stack[target.stack.length - 1].append(row);
    if (!target.details.open && !done) target.details.open = true;
  }

  async function poll() {
    let answer;
    try {
      const response = await fetch(`${url}?offset=${offset}&line=${line}`, {
        headers: { accept: 'application/json' },
        credentials: 'same-origin',
      });
      if (!response.ok) throw new Error(`status ${response.status}`);
      answer = await response.json();
    } catch {
      setTimeout(poll, 2000);
      return;
    }
    steps = answer.steps;
    refreshSteps();
    for (const entry of answer.lines) addLine(entry);
    offset = answer.offset;
    line = answer.line;
    const status = document.getElementById('job-status');
    if (status && status.textContent !== answer.status) {
      status.textContent = answer.status;
      status.className = `status status-${answer.status}`;
    }
    if (answer.more) return poll();
    if (answer.done) {
      done = true;
      // The job finished while watched: reload once so the buttons and statuses match.
      if (!startedDone) window.location.reload();
      return;
    }
    setTimeout(poll, 1000);
  }

  const toggle = document.getElementById('toggle-time');
  if (toggle) {
    toggle.addEventListener('click', () => {
      const shown = log.classList.toggle('show-time');
      toggle.setAttribute('aria-pressed', String(shown));
      toggle.textContent = shown ? 'Hide timestamps' : 'Show timestamps';
    });
  }
  const switcher = document.getElementById('attempt-switcher');
  if (switcher) {
    switcher.addEventListener('change', () => {
      window.location.assign(switcher.dataset.base + switcher.value);
    });
  }
  poll();
})();
