// Draws every chart of `specs` (set just before this script) with vega-embed.
const drawn = Object.entries(specs).map(([id, spec]) => {
  const el = document.getElementById(id);
  return vegaEmbed(el, spec, {renderer: 'svg', actions: false})
    .then((result) => {
      el.dataset.rendered = 'ok';
      // the drill-down listens to this to wire clicks on the heatmaps (drilldown.js)
      document.dispatchEvent(new CustomEvent('needlescope:chart-drawn',
        {detail: {id: id, view: result.view}}));
    })
    .catch((err) => {
      el.dataset.rendered = 'error';
      el.textContent = 'This chart failed to draw: ' + err;
      console.error('chart ' + id + ' failed:', err);
    });
});
Promise.allSettled(drawn).then(() => { document.body.dataset.charts = 'done'; });
