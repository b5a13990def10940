// The kai dashboard's script (served inline by kai.dashboard._page; no other file is loaded).
(function () {
  var PALETTE = __PALETTE__;
  var colors = {};
  function colorOf(q) {
    if (!(q in colors)) { colors[q] = PALETTE[Object.keys(colors).length % PALETTE.length]; }
    return colors[q];
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { for (var k in attrs) { e.setAttribute(k, attrs[k]); } }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function clear(id) { var e = document.getElementById(id); while (e.firstChild) { e.removeChild(e.firstChild); } return e; }
  function num(x, r) {
    if (x === -1) { return '∞'; }
    if (r === 'cpu') { return (x / 1000).toFixed(x % 1000 ? 1 : 0); }
    if (r === 'memory') { return (x / 1073741824).toFixed(x >= 10737418240 ? 0 : 1) + 'Gi'; }
    return (Math.round(x * 100) / 100).toString();
  }
  function table(id, header, rows) {
    var host = clear(id);
    var t = el('table'); var tr = el('tr');
    header.forEach(function (h) { tr.appendChild(el('th', null, h)); });
    var th = el('thead'); th.appendChild(tr); t.appendChild(th);
    var tb = el('tbody');
    rows.forEach(function (r) {
      var row = el('tr');
      r.forEach(function (c, i) {
        var td = el('td', c && c.cls ? {'class': c.cls} : (i === 0 ? {'class': 'l'} : null), c && c.text !== undefined ? c.text : c);
        row.appendChild(td);
      });
      tb.appendChild(row);
    });
    t.appendChild(tb); host.appendChild(t);
    if (!rows.length) { host.appendChild(el('p', {'class': 'note'}, 'none')); }
  }
  function queues(doc) {
    var rows = doc.queues.map(function (q) {
      var cells = [{text: '  '.repeat(q.depth) + q.queue, cls: 'l q' + q.depth}];
      ['gpu', 'cpu', 'memory'].forEach(function (r) {
        cells.push(num(q.quota[r], r) + ' / ' + num(q.fairShare[r], r) + ' / ' + num(q.allocated[r], r) + ' / ' + num(q.requested[r], r));
      });
      cells.push({text: q.standing.join(', '), cls: 'l'});
      return cells;
    });
    table('queues', ['queue', 'GPU', 'CPU (cores)', 'memory', 'standing'], rows);
  }
  function chart(doc) {
    var host = clear('chart');
    var leaves = doc.queues.filter(function (q) { return q.leaf; }).map(function (q) { return q.queue; });
    var h = doc.history; var W = 900, H = 200, L = 40;
    var svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('class', 'plot'); svg.setAttribute('width', W); svg.setAttribute('height', H + 20);
    var max = 1;
    h.forEach(function (s) { leaves.forEach(function (q) { var v = s.queues[q]; if (v) { max = Math.max(max, v[0], v[1]); } }); });
    function xy(i, v) { var x = L + (h.length > 1 ? i * (W - L - 10) / (h.length - 1) : 0); return x.toFixed(1) + ',' + (H - v / max * (H - 10)).toFixed(1); }
    var axis = document.createElementNS('http://www.w3.org/2000/svg', 'text');
    axis.setAttribute('x', 2); axis.setAttribute('y', 12); axis.textContent = max + ' GPUs'; svg.appendChild(axis);
    leaves.forEach(function (q) {
      [0, 1].forEach(function (k) {
        var pts = h.map(function (s, i) { return xy(i, (s.queues[q] || [0, 0])[k]); }).join(' ');
        var p = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
        p.setAttribute('points', pts); p.setAttribute('fill', 'none'); p.setAttribute('stroke', colorOf(q));
        p.setAttribute('stroke-width', k ? 1 : 2); if (k) { p.setAttribute('stroke-dasharray', '4 3'); }
        svg.appendChild(p);
      });
    });
    host.appendChild(svg);
    var lg = el('div', {'class': 'legend'});
    leaves.forEach(function (q) { var k = el('span', {'class': 'key'}); var i = el('i'); i.style.background = colorOf(q); k.appendChild(i); k.appendChild(document.createTextNode(q)); lg.appendChild(k); });
    lg.appendChild(el('span', {'class': 'note'}, 'solid: allocated GPUs · dashed: fair share'));
    host.appendChild(lg);
  }
  function options(id, values) {
    var s = document.getElementById(id); var keep = s.value;
    while (s.options.length > 1) { s.remove(1); }
    values.forEach(function (v) { s.appendChild(el('option', {value: v}, v)); });
    s.value = values.indexOf(keep) >= 0 ? keep : '';
  }
  var last = null;
  function pending() {
    var doc = last; if (!doc) { return; }
    var fq = document.getElementById('fq').value, fn = document.getElementById('fn').value;
    var rows = doc.pending.filter(function (p) { return (!fq || p.queue === fq) && (!fn || p.namespace === fn); })
      .map(function (p) { return [p.podGroup, p.queue, p.priority, p.pods + ' / ' + p.minMember, p.code, {text: p.reason, cls: 'reason'}]; });
    table('pending', ['PodGroup', 'queue', 'priority', 'pods / min', 'code', 'why it waits'], rows);
  }
  function gpus(doc) {
    var host = clear('map');
    doc.gpuMap.nodes.forEach(function (n) {
      var row = el('div', {'class': 'node'}); row.appendChild(el('span', {title: n.name}, n.name));
      n.gpus.forEach(function (cell, g) {
        var c = el('div', {'class': 'gpu', title: n.name + ' GPU ' + g + (cell.length ? ': ' + cell.map(function (h) { return h.pod + ' (' + h.queue + ', ' + h.share + ')'; }).join('; ') : ': free')});
        cell.forEach(function (h) { var i = el('i', h.releasing ? {'class': 'rel'} : null); i.style.height = Math.round(h.share * 100) + '%'; i.style.background = colorOf(h.queue); c.appendChild(i); });
        row.appendChild(c);
      });
      host.appendChild(row);
    });
    if (doc.gpuMap.more) { host.appendChild(el('p', {'class': 'note'}, 'and ' + doc.gpuMap.more + ' more GPU nodes')); }
  }
  function render(doc) {
    last = doc;
    document.getElementById('sub').textContent = doc.source + ' · ' + doc.time + ' · ' + doc.nodes + ' nodes · ' + doc.pods + ' pods';
    var used = 0, total = 0;
    doc.gpuMap.nodes.forEach(function (n) { n.gpus.forEach(function (c) { total += 1; c.forEach(function (h) { used += h.share; }); }); });
    var cards = clear('cards');
    [[doc.queues.length, 'queues'], [doc.pending.length, 'waiting PodGroups'], [Math.round(used * 100) / 100 + ' / ' + total, 'GPUs held (map)'], [doc.evictions.length, 'recent evictions']].forEach(function (c) {
      var d = el('div', {'class': 'card'}); d.appendChild(el('b', null, c[0])); d.appendChild(el('span', null, c[1])); cards.appendChild(d);
    });
    queues(doc); chart(doc);
    options('fq', doc.queues.filter(function (q) { return q.leaf; }).map(function (q) { return q.queue; }));
    options('fn', Array.from(new Set(doc.pending.map(function (p) { return p.namespace; }))).sort());
    pending(); gpus(doc);
    table('evictions', ['time', 'pod', 'PodGroup', 'action', 'reason'], doc.evictions.slice(0, 50).map(function (e) { return [e.time + (e.real ? '' : ' (planned)'), e.pod, e.podGroup, e.action, {text: e.reason, cls: 'reason'}]; }));
    table('cycles', ['time', 'binds', 'pipelined', 'evictions', 'engine ms', 'end to end ms', 'per action ms'], doc.cycles.slice(0, 20).map(function (c) {
      return [c.time + (c.real ? '' : ' (dry run)'), c.binds, c.pipelined, c.evictions, c.engine === undefined ? '-' : c.engine, c.e2e === undefined ? '-' : c.e2e,
        {text: Object.keys(c.actionsMs).map(function (k) { return k + ' ' + c.actionsMs[k]; }).join(', '), cls: 'l'}];
    }));
    var root = document.documentElement;
    root.setAttribute('data-rendered', String(Number(root.getAttribute('data-rendered') || 0) + 1));
    root.setAttribute('data-gpu-cells', String(document.querySelectorAll('#map .gpu').length));
  }
  function poll() {
    fetch('api/overview', {cache: 'no-store'}).then(function (r) {
      if (!r.ok) { throw new Error('HTTP ' + r.status); }
      return r.json();
    }).then(function (doc) {
      render(doc); var s = document.getElementById('live'); s.textContent = 'live'; s.className = 'live';
    }).catch(function (e) {
      var s = document.getElementById('live'); s.textContent = 'stale: ' + e.message; s.className = 'live stale';
    }).then(function () { setTimeout(poll, __POLL_MS__); });
  }
  document.getElementById('fq').addEventListener('change', pending);
  document.getElementById('fn').addEventListener('change', pending);
  poll();
})();
