(() => {
  const data = JSON.parse(document.getElementById('drilldown').textContent);
  const panel = document.getElementById('answers-panel');
  const list = document.getElementById('answers-list');
  const sep = '\u001f';
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  };
  const fmt = (v) => (typeof v === 'number'
    ? (Number.isInteger(v) ? String(v) : v.toFixed(1)) : (v ?? ''));
  const fill = (template, value) => template.replace('{}', () => fmt(value));
  document.getElementById('answers-close')
    .addEventListener('click', () => { panel.hidden = true; });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') panel.hidden = true; });

  function contextCell(parts) {
    const td = el('td', null, 'ctx');
    if (!parts) return td;
    td.append(parts[0]);
    td.append(el('span', parts[1], 'needle'));
    td.append(parts[2]);
    return td;
  }

  function expectedCell(ctx, i) {
    const td = el('td', ctx.expected[i - 1] ?? '', 'said');
    const keywords = ctx.keywords && ctx.keywords[i - 1];
    if (keywords) td.append(el('div', 'keywords: ' + keywords.join(', '), 'muted'));
    return td;
  }

  function renderAnswer(answer, chart, focusValue) {
    const box = el('div', null, 'answer');
    box.dataset.cellId = answer.cell_id;
    const grade = [
      'epoch ' + answer.epoch, 'repeat ' + answer.repeat, answer.filler,
      answer.error_kind ? 'error: ' + answer.error_kind
        : answer.validity && answer.validity !== 'valid' && answer.validity !== 'unknown'
          ? 'invalid (' + answer.validity + '): not counted'
        : answer.parse_ok === null || (answer.parse_ok && answer.accuracy === null)
          ? 'not counted (an empty reply, or keys the seed could not order)'
          : answer.parse_ok ? chart.accuracy + ' ' + fmt(answer.accuracy)
          : answer.accuracy === null ? 'no parseable JSON'
          : chart.accuracy + ' ' + fmt(answer.accuracy) + ', nothing read',
      'parse_ok ' + (answer.parse_ok === null ? '–' : answer.parse_ok),
    ];
    if (answer.judge) grade.push('judge ' + (answer.judge[0] ?? '–') + '/10');
    grade.push('cell ' + answer.cell_id);
    box.append(el('div', grade.join(' · '), 'grade'));
    if (answer.judge && answer.judge[1]) {
      box.append(el('div', 'judge: ' + answer.judge[1], 'muted'));
    }
    if (answer.error) box.append(el('div', answer.error, 'muted'));
    if (answer.parse_error) box.append(el('div', 'parse error: ' + answer.parse_error, 'muted'));
    const ctx = data.contexts[answer.cell_id] || {unavailable: 'no cell row', expected: []};
    const expected = ctx.expected || [];
    if (ctx.question) box.append(el('div', 'question: ' + ctx.question, 'question'));
    if (ctx.true_answer) box.append(el('div', 'true answer: ' + ctx.true_answer, 'muted'));
    box.append(el('div', 'expected: ' + expected.map((v, i) => (i + 1) + ': ' + v).join(', '),
      'expected'));
    const reply = answer.response === null ? '(no reply stored)' : answer.response;
    box.append(el('pre', reply, 'reply'));
    const kept = answer.response ? answer.response.length : 0;
    if (answer.response_chars && answer.response_chars > kept) {
      box.append(el('div', 'reply cut at ' + kept + ' of ' + answer.response_chars
        + ' characters', 'muted'));
    }
    const count = Math.max(expected.length, answer.outcomes.length);
    if (count) {
      const table = el('table', null, 'needles');
      const head = el('tr');
      const columns = ['needle', 'expected', 'outcome'];
      if (ctx.retrieval) columns.push('retrieval');
      columns.push('context' + (ctx.source ? ' (' + ctx.source + ')' : ''));
      columns.forEach((h) => head.append(el('th', h)));
      table.append(head);
      for (let i = 1; i <= count; i++) {
        const row = el('tr');
        const code = answer.outcomes[i - 1];
        const outcome = code && code !== '-' ? data.outcome_names[parseInt(code, 36)] : null;
        if (chart.focus === 'needle_index' && focusValue === i) row.className = 'focus';
        row.append(el('td', i));
        row.append(expectedCell({...ctx, expected}, i));
        row.append(el('td', outcome ?? '–', outcome ? 'outcome-' + outcome : ''));
        if (ctx.retrieval) row.append(el('td', ctx.retrieval[i - 1] ?? '', 'said'));
        if (ctx.needles) row.append(contextCell(ctx.needles[i - 1]));
        else if (i === 1) {
          const td = el('td', 'context unavailable: ' + ctx.unavailable, 'ctx unavailable');
          td.rowSpan = count;
          row.append(td);
        }
        table.append(row);
      }
      box.append(table);
    }
    if (answer.hallucinations.length) {
      const lines = answer.hallucinations.map((h) => {
        const hit = chart.focus === 'interval' && focusValue === h[2] + '–' + h[3];
        return (hit ? '▶ ' : '') + h[1] + ' (between needles ' + h[2] + ' and ' + h[3] + ')';
      });
      box.append(el('div', 'invented values: ' + lines.join('; '), 'hallucinated'));
    }
    return box;
  }

  // The key of a clicked cell: the chart's target and the datum's fields, joined as
  // drilldown.cell_key joins them (String() of each value); null for a mark that is no cell.
  function keyOf(chart, datum) {
    if (datum[chart.focus] === undefined) return null;
    const values = chart.fields.map(([field, , absent]) => datum[field] ?? absent);
    if (values.some((v) => v === null || v === undefined)) return null;
    return {key: [chart.target, ...values].join(sep), values};
  }

  function show(chartId, datum) {
    const chart = data.charts[chartId];
    const found = chart && datum ? keyOf(chart, datum) : null;
    if (!found) return;
    const {key, values} = found;
    const group = data.groups[key];
    const focusValue = datum[chart.focus];
    const where = chart.fields
      .map(([, shown, absent], i) => (absent !== null && values[i] === absent
        ? null : fill(shown, values[i])))
      .filter((v) => v !== null);
    if (chart.focus_shown) where.push(fill(chart.focus_shown, focusValue));
    document.getElementById('answers-title').textContent = chart.title + ': ' + where.join(' · ');
    list.replaceChildren();
    panel.dataset.chart = chartId;
    panel.dataset.key = key;
    if (!group) {
      document.getElementById('answers-summary').textContent = 'No answers behind this cell.';
    } else {
      const shown = group.shown.length;
      let text = group.parsed + ' parsed of ' + group.answers + ' answers behind this cell';
      if (group.errors) text += ', ' + group.errors + ' failed request(s)';
      text += shown < group.answers + group.errors
        ? '; showing ' + shown + ' (at most ' + data.per_cell
          + ' per cell), parsed answers and the latest epoch first.'
        : '; all shown.';
      document.getElementById('answers-summary').textContent = text;
      group.shown.forEach((id) => list.append(renderAnswer(data.answers[id], chart, focusValue)));
    }
    panel.hidden = false;
    panel.scrollTop = 0;
  }

  document.addEventListener('needlescope:chart-drawn', (event) => {
    const {id, view} = event.detail;
    if (!data.charts[id] || !view) return;
    document.getElementById(id).classList.add('drillable');
    view.addEventListener('click', (_event, item) => {
      if (item && item.datum) show(id, item.datum);
    });
  });
  window.needlescopeDrilldown = show;
})();
