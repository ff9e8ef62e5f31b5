#!/usr/bin/env python3
"""Checks the DOM that `chromium --dump-dom` printed for an `hpctrain report` page against the run
directory it was written from. Expected counts come from the run's files, read here on their own:

- no error recorded in #page-errors, the page's script ran to its end (body data-report="drawn"),
  and chromium's log (--enable-logging=stderr) has no console message;
- every chart: against step, one point per distinct step of its kind (the last line written for
  a step wins), against wall time one per line; each series holds as many numbers, and their sum
  is that of the last values written; resumes marked on step charts, attempt starts on wall-time
  charts;
- the timeline: one .attempt-bar per attempts.jsonl line, labelled with that line's reason, one
  .checkpoint-mark per committed checkpoint (step-N/ with manifest.json), per run (each task of a
  job array);
- a run continued by a chain of jobs (submissions.jsonl's chained_from): the header names every
  job of the chain;
- node losses (node_lost, node_lost_requeued, node_lost_chained lines): one .node-loss-mark on the timeline and one
  mark on each wall-time chart per loss with a readable detection time, one .node-loss-row per
  loss in the node-loss table showing the lost and added nodes, and the header's count;
- the goodput ledger: at least one .goodput-bar per attempts.jsonl line with its start and end
  (one per srun step; more while the run goes on), whose seconds sum to the wall time within 1%;
- the run directory's path shows in the header as it is (escaping kept it whole).

check_page.py DOM CHROMIUM_LOG RUN_DIR [--no-metrics]
"""
import glob
import json
import os
import re
import sys
from html.parser import HTMLParser

QUANTITIES = [  # id, kind, columns (as in launcher/report/report.html.in)
    ('loss', 'train', ['loss']),
    ('accuracy', 'eval', ['top1', 'top5']),
    ('throughput', 'train', ['images_per_s']),
    ('lr', 'train', ['lr']),
    ('loss_scale', 'train', ['loss_scale']),
]

errors = []


def fail(msg):
    errors.append(msg)


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements = []  # (tag, attrs, section)
        self.section = None
        self.page_text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'section' and 'data-run' in a:
            self.section = a['data-run']
        self.elements.append((tag, a, self.section))

    def handle_data(self, data):
        self.page_text.append(data)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float('inf')


def json_objects(path):
    """The lines of a .jsonl file that are JSON objects, in file order; none when it is missing."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict):
                    out.append(r)
    return out


def expected_charts(run_dir, prefix):
    records = [r for r in json_objects(os.path.join(run_dir, 'metrics.jsonl'))
               if isinstance(r.get('kind'), str) and isinstance(r.get('step'), int)]
    out = {}
    for qid, kind, cols in QUANTITIES:
        lines = [r for r in records if r['kind'] == kind]
        last = {}
        for r in lines:
            last[r['step']] = r
        scale = 100 if kind == 'eval' else 1  # accuracy is drawn in percent
        def sums(rs):
            return [sum(r[c] * scale for r in rs if is_number(r.get(c))) for c in cols]
        out[prefix + qid + '/step'] = (len(last), [sum(is_number(r.get(c)) for r in last.values()) for c in cols],
                                       sums(last.values()))
        out[prefix + qid + '/time'] = (len(lines), [sum(is_number(r.get(c)) for r in lines) for c in cols],
                                       sums(lines))
    return out, records


def committed(run_dir):
    n = 0
    for d in glob.glob(os.path.join(run_dir, 'checkpoints', 'step-*')):
        name = os.path.basename(d)
        m = re.fullmatch(r'step-([0-9]{9,18})', name)
        # Only names as the store writes them: zero-padded to 9 digits (docs/checkpoint-format.md).
        if m and name == 'step-%09d' % int(m.group(1)) and os.path.exists(os.path.join(d, 'manifest.json')):
            n += 1
    return n


def ledger(run_dir):
    """The ledger's lines that are JSON objects, in file order."""
    return json_objects(os.path.join(run_dir, 'attempts.jsonl'))


def attempts(run_dir):
    return len(ledger(run_dir))


def chain(submissions):
    """The job ids of the last submission's chain, oldest first (chained_from back from the last)."""
    out = [submissions[-1]]
    for s in reversed(submissions[:-1]):
        if out[-1].get('chained_from') and s.get('job_id') == out[-1]['chained_from']:
            out.append(s)
    return [s['job_id'] for s in reversed(out)]


def starts_after_first(run_dir):
    path = os.path.join(run_dir, 'attempts.jsonl')
    if not os.path.exists(path):
        return 0
    n = 0
    with open(path) as f:
        for i, line in enumerate(l for l in f if l.strip()):
            try:
                a = json.loads(line)
            except ValueError:
                continue
            if i > 0 and isinstance(a, dict) and re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', str(a.get('start'))):
                n += 1
    return n


def node_losses(run_dir):
    """The ledger's node-loss lines, in file order."""
    return [a for a in ledger(run_dir)
            if a.get('reason') in ('node_lost', 'node_lost_requeued', 'node_lost_chained')]


def detected_readable(loss):
    return re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z', str(loss.get('detected'))) is not None


def check_page_ran(dom, dom_text, log_file):
    """Errors: recorded in the page, or logged by chromium; and the page's script ran to its end."""
    for tag, a, _ in dom.elements:
        if a.get('id') == 'page-errors' and a.get('data-count') != '0':
            fail('the page recorded errors: data-count=%s' % a.get('data-count'))
        if a.get('class') == 'page-error':
            fail('page error element present')
    for m in re.findall(r'<div class="page-error">([^<]*)', dom_text):
        fail('page error: ' + m)
    if not any(t == 'body' and a.get('data-report') == 'drawn' for t, a, _ in dom.elements):
        fail('the page script did not run to its end (no body[data-report=drawn])')
    with open(log_file, encoding='utf-8', errors='replace') as f:
        for line in f:
            if ':CONSOLE' in line or 'Uncaught' in line:
                fail('chromium log: ' + line.strip())


def check_chart(cid, a, d, points, values, sums):
    """One drawn chart against what the run directory `d` says it must show."""
    if a.get('data-drawn') != 'true':
        fail('%s: not drawn' % cid)
    if a.get('data-points') != str(points):
        fail('%s: %s points, expected %d' % (cid, a.get('data-points'), points))
    if a.get('data-series-lengths') != ','.join([str(points)] * len(values)):
        fail('%s: series lengths %s, expected %d each' % (cid, a.get('data-series-lengths'), points))
    if a.get('data-series-values') != ','.join(map(str, values)):
        fail('%s: series values %s, expected %s' % (cid, a.get('data-series-values'), values))
    # Resumes on step charts: at least one per attempt after the first (the ledger's; the
    # page adds any the metrics show that the ledger does not explain). Attempt starts
    # on wall-time charts: one per attempt after the first.
    later = max(0, starts_after_first(d)) + sum(map(detected_readable, node_losses(d)))
    marks = int(a.get('data-marks', '-1'))
    if cid.endswith('/step') and marks < max(0, attempts(d) - 1):
        fail('%s: %d resume marks, expected at least %d' % (cid, marks, attempts(d) - 1))
    if cid.endswith('/time') and marks != later:
        fail('%s: %d attempt-start and node-loss marks, expected %d' % (cid, marks, later))
    got = [float(v) for v in (a.get('data-series-sums') or '').split(',') if v]
    if len(got) != len(sums) or any(abs(g - w) > 1e-6 * max(1.0, abs(w)) for g, w in zip(got, sums)):
        fail('%s: series sums %s, expected %s (the last value written for each step)' % (cid, got, sums))


def check_charts(name, d, prefix, charts, no_metrics, dom_text, text):
    """The charts of one run; returns what was expected of them and how many were checked."""
    exp, records = expected_charts(d, prefix)
    if no_metrics:
        if records:
            fail('fixture has metrics but --no-metrics was given')
        if 'data-no-metrics="true"' not in dom_text or 'No metrics yet' not in text:
            fail('%s: the page does not say that there are no metrics yet' % name)
    drawn = 0
    for cid, (points, values, sums) in exp.items():
        if points == 0:
            if not no_metrics and cid in charts and charts[cid].get('data-points') not in (None, '0'):
                fail('%s: %s points, expected none' % (cid, charts[cid].get('data-points')))
            continue
        a = charts.get(cid)
        if a is None:
            fail('%s: no chart' % cid)
            continue
        check_chart(cid, a, d, points, values, sums)
        drawn += 1
    return exp, drawn


def check_timeline(name, d, dom, text):
    """One run's attempt bars, checkpoint marks and node losses; returns their counts."""
    bars = sum(1 for t, a, s in dom.elements if a.get('class') == 'attempt-bar' and s == name)
    marks = sum(1 for t, a, s in dom.elements if a.get('class') == 'checkpoint-mark' and s == name)
    if bars != attempts(d):
        fail('%s: %d attempt bars, expected %d' % (name, bars, attempts(d)))
    reasons = [a.get('data-reason') for t, a, s in dom.elements if a.get('class') == 'attempt-bar' and s == name]
    if reasons != [str(a.get('reason')) for a in ledger(d)]:
        fail('%s: the attempt bars say %s, the ledger %s' % (name, reasons, [a.get('reason') for a in ledger(d)]))
    if marks != committed(d):
        fail('%s: %d checkpoint marks, expected %d' % (name, marks, committed(d)))
    losses = node_losses(d)
    loss_marks = sum(1 for t, a, s in dom.elements if a.get('class') == 'node-loss-mark' and s == name)
    loss_rows = sum(1 for t, a, s in dom.elements if a.get('class') == 'node-loss-row' and s == name)
    if loss_marks != sum(map(detected_readable, losses)):
        fail('%s: %d node-loss marks, expected %d' % (name, loss_marks, sum(map(detected_readable, losses))))
    if loss_rows != len(losses):
        fail('%s: %d node-loss rows, expected %d' % (name, loss_rows, len(losses)))
    for loss in losses:
        for key in ('lost_nodes', 'added_nodes', 'detected_by'):
            if loss.get(key) and loss[key] not in text:
                fail('%s: %s %r not shown' % (name, key, loss[key]))
    if losses and not re.search(r'node losses\s*%d \(recovered in the allocation: %d\)' % (
            len(losses), sum(1 for l in losses if l['reason'] == 'node_lost' and l.get('recover_s') is not None)), text):
        fail('%s: the node-loss count is not shown' % name)
    return bars, marks, loss_rows


def check_goodput(name, d, dom):
    """One run's goodput bars: one per timed ledger line at least, their seconds the wall time."""
    box = [a for t, a, s in dom.elements if a.get('class') == 'goodput' and s == name]
    bars = [a for t, a, s in dom.elements if a.get('class') == 'goodput-bar' and s == name]
    timed = sum(1 for a in ledger(d) if a.get('start') and a.get('end'))
    if len(box) != 1:
        fail('%s: %d goodput sections, expected 1' % (name, len(box)))
        return 0
    if len(bars) < timed:
        fail('%s: %d goodput bars, expected at least %d' % (name, len(bars), timed))
    if bars:
        wall = float(box[0]['data-goodput-wall'])
        total = sum(float(a['data-seconds']) for a in bars)
        if abs(total - wall) > 0.01 * wall:
            fail('%s: the goodput bars hold %.3f s, the wall time is %.3f s' % (name, total, wall))
    return len(bars)


def main():
    dom_file, log_file, run_dir = sys.argv[1:4]
    no_metrics = '--no-metrics' in sys.argv[4:]
    with open(dom_file, encoding='utf-8') as f:
        dom_text = f.read()
    dom = Dom()
    dom.feed(dom_text)
    text = ''.join(dom.page_text)
    check_page_ran(dom, dom_text, log_file)

    # The run directory as written, escaping undone by the browser.
    want_dir = os.path.abspath(run_dir)
    if want_dir not in text:
        fail('the run directory %r is not shown whole in the page' % want_dir)

    with open(os.path.join(run_dir, 'submissions.jsonl')) as f:
        submissions = [json.loads(l) for l in f if l.strip()]
    sub = submissions[-1]
    jobs = chain(submissions)
    if len(jobs) > 1 and ' \u2192 '.join(jobs) not in text:
        fail('the header does not show the chain of jobs %s' % ' -> '.join(jobs))
    tasks = sub.get('array_tasks', 0)
    runs = [('task-%03d' % t, os.path.join(run_dir, 'task-%03d' % t)) for t in range(tasks)] if tasks else [('run', run_dir)]

    charts = {a['data-chart']: a for t, a, _ in dom.elements if 'data-chart' in a}
    drawn = 0
    for name, d in runs:
        prefix = name + '/' if tasks else ''
        exp, drawn_here = check_charts(name, d, prefix, charts, no_metrics, dom_text, text)
        drawn += drawn_here
        bars, marks, loss_rows = check_timeline(name, d, dom, text)
        goodput_bars = check_goodput(name, d, dom)
        print('%s: %d charts checked, %d attempt bars, %d checkpoint marks, %d node losses, %d goodput bars' % (name, len([c for c in exp.values() if c[0]]), bars, marks, loss_rows, goodput_bars))
    if not no_metrics and drawn == 0:
        fail('no chart checked')
    if tasks:
        rows = sum(1 for t, a, _ in dom.elements if a.get('class') == 'task-row')
        if rows != tasks:
            fail('%d task rows, expected %d' % (rows, tasks))
    for e in errors:
        print('FAIL: ' + e, file=sys.stderr)
    sys.exit(1 if errors else 0)

if __name__ == '__main__':
    main()
