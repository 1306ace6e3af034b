(() => {
  const all = JSON.parse(document.getElementById('comparison-data').textContent);
  const sep = '\u001f';
  const probeSelect = document.getElementById('compare-probe');
  const selA = document.getElementById('compare-a');
  const selB = document.getElementById('compare-b');
  const overall = document.getElementById('compare-overall');
  const body = document.querySelector('#compare-table tbody');
  const num = (v, d = 1) => (v === null || v === undefined ? '' : Number(v).toFixed(d));
  const pv = (v) => (v === null || v === undefined ? ''
    : (v < 0.001 ? '<0.001' : Number(v).toFixed(3)));
  const interval = (lo, hi) => (lo === null || hi === null ? '' : num(lo) + ' to ' + num(hi));
  const td = (text, cls) => {
    const c = document.createElement('td');
    c.textContent = text;
    if (cls) c.className = cls;
    return c;
  };

  function options(select, entries, chosen) {
    select.replaceChildren(...entries.map((e) => {
      const o = document.createElement('option');
      o.value = e.id; o.textContent = e.label; o.selected = e.id === chosen;
      return o;
    }));
  }

  // The pair as computed, or the reverse one with its figures mirrored (b - a becomes a - b).
  function find(data, a, b) {
    const direct = data.pairs[a + sep + sep + b];
    if (direct) return direct;
    const r = data.pairs[b + sep + sep + a];
    if (!r || r.error) return r;
    const flip = (c) => ({...c, mean_a: c.mean_b, mean_b: c.mean_a,
      diff: c.diff === null ? null : -c.diff, diff_lo: c.diff_hi === null ? null : -c.diff_hi,
      diff_hi: c.diff_lo === null ? null : -c.diff_lo,
      mcnemar_b01: c.mcnemar_b10, mcnemar_b10: c.mcnemar_b01});
    return {...flip(r), n_pairs: r.n_pairs, cells: r.cells.map(flip)};
  }

  function rowClass(c) {
    if (!c.significant || c.diff === null) return '';
    return c.diff > 0 ? 'better' : 'worse';
  }

  function render() {
    const data = all[probeSelect.value];
    const a = selA.value, b = selB.value;
    body.replaceChildren();
    const found = a === b ? null : find(data, a, b);
    const labelA = selA.selectedOptions[0] ? selA.selectedOptions[0].textContent : a;
    const labelB = selB.selectedOptions[0] ? selB.selectedOptions[0].textContent : b;
    document.getElementById('compare-head-a').textContent = 'A: ' + labelA;
    document.getElementById('compare-head-b').textContent = 'B: ' + labelB;
    if (!found) {
      overall.textContent = a === b ? 'Pick two different sides.'
        : 'Not compared: pick two models, or two epochs of one model.';
      overall.className = '';
      return;
    }
    if (found.error) {
      overall.textContent = 'Cannot compare: ' + found.error;
      overall.className = '';
      return;
    }
    const parts = [
      'Overall: ' + found.n_pairs + ' pairs', 'A ' + num(found.mean_a), 'B ' + num(found.mean_b),
      'B − A ' + num(found.diff) + ' (95% interval ' + interval(found.diff_lo, found.diff_hi) + ')',
      'McNemar p ' + pv(found.mcnemar_p) + ' (' + found.mcnemar_b01 + ' needles only B hit, '
        + found.mcnemar_b10 + ' only A hit)',
    ];
    if (found.dropped_parse_failures) {
      parts.push('left out for a parse failure: ' + found.dropped_parse_failures);
    }
    if (found.dropped_errors) parts.push('left out for a failed request: ' + found.dropped_errors);
    if (found.dropped_invalid) {
      parts.push('left out as invalid (truncated, refused, …): ' + found.dropped_invalid);
    }
    overall.textContent = parts.join(' · ');
    overall.className = rowClass(found);
    found.cells.forEach((c) => {
      const tr = document.createElement('tr');
      tr.className = rowClass(c);
      const length = c.length === null ? ''
        : Number(c.length).toLocaleString('en-US') + ' ' + (c.length_unit ?? '');
      const small = c.mcnemar_p !== null && c.mcnemar_p < 0.05;
      tr.append(td(length), td(c.needle_count ?? ''), td(c.n), td(num(c.mean_a)),
        td(num(c.mean_b)), td(num(c.diff)), td(interval(c.diff_lo, c.diff_hi)),
        td(pv(c.mcnemar_p), small ? 'sig-p' : ''), td(c.needle_pairs), td(c.dropped_invalid));
      body.append(tr);
    });
  }

  function loadProbe() {
    const data = all[probeSelect.value];
    options(selA, data.entries, data.default[0]);
    options(selB, data.entries, data.default[1]);
    const note = document.getElementById('compare-note');
    note.textContent = data.note ? 'Compared: ' + data.note + '.' : '';
    render();
  }
  probeSelect.addEventListener('change', loadProbe);
  selA.addEventListener('change', render);
  selB.addEventListener('change', render);
  document.getElementById('compare-swap').addEventListener('click', () => {
    const a = selA.value; selA.value = selB.value; selB.value = a; render();
  });
  loadProbe();
})();
