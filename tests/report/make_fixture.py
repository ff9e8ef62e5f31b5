#!/usr/bin/env python3
"""Fixture run directories for the report tests (docs/run-directory.md, docs/checkpoint-format.md).

make_fixture.py preempted DIR   a run requeued once and then completed: metrics.jsonl repeats the
                                steps after the resume, committed checkpoints, one step directory
                                without a manifest and a save in progress (.step-N.tmp)
make_fixture.py array DIR       a job array of two tasks, each like the above (the second one with
                                no evaluation yet and a single attempt)
make_fixture.py empty DIR       submitted, nothing run yet: no metrics, no attempts
make_fixture.py chain DIR       a run Slurm would not requeue, continued by a chain of three jobs
                                (4711, 4712, 4713): the first two attempts chained, the third
                                completes; submissions.jsonl has a line a job
make_fixture.py nodeloss DIR    a run that lost nodes inside its allocation: attempt 1 goes on
                                after losing node2 (a spare takes its place) and node3 (the world
                                shrinks), then loses node4 and falls back to a requeue; attempt 2
                                completes. One ledger line per srun step, the first without "step"
Node names carry "</script><!--" so that the page's JSON escaping is exercised.
"""
import json
import os
import sys

T0 = 1795458000  # 2026-11-23T16:20:00Z
EVIL = '</script><!--<script>window.hacked=1</script>'


def iso(t):
    import time
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))


def spec(d, name):
    with open(os.path.join(d, 'spec.toml'), 'w') as f:
        f.write(f'''[job]
name = "{name}"
nodes = 1
tasks_per_node = 2
run_dir = "/var/tmp/report-fixture/{name}"
worker = "/bin/true"
[data]
synthetic = true
synthetic_samples = 512
synthetic_image_size = 16
[model]
arch = "resnet20"
num_classes = 10
[train]
epochs = 3
batch_size = 16
''')


def checkpoint(d, step, t):
    c = os.path.join(d, 'checkpoints', 'step-%09d' % step)
    os.makedirs(c)
    with open(os.path.join(c, 'model.pt'), 'wb') as f:
        f.write(b'x' * 16)
    with open(os.path.join(c, 'manifest.json'), 'w') as f:
        json.dump({'committed_at': iso(t), 'files': {'model.pt': {'rank': 0, 'size': 16,
                   'xxh3_64': '0000000000000000'}}, 'format': 'hpctrain-checkpoint',
                   'format_version': 1, 'hash': 'xxh3_64', 'meta': {'step': step}, 'step': step,
                   'world_size': 2}, f, indent=2, sort_keys=True)


def jsonl(path, records):
    with open(path, 'w') as f:
        for r in records:
            f.write(json.dumps(r) + '\n')


def train_line(step, t, loss):
    return {'kind': 'train', 'step': step, 'epoch': 1 + (step - 1) // 40, 'loss': loss,
            'lr': 0.1 * (1 - step / 130), 'images_per_s': 400.0 + step, 'loss_scale': 1.0,
            'wall_time': t}


def eval_line(step, t, top1):
    return {'kind': 'eval', 'step': step, 'epoch': step // 40, 'loss': 1.0 - top1, 'top1': top1,
            'top5': min(1.0, top1 + 0.2), 'samples': 512, 'seconds': 1.5, 'wall_time': t}


def preempted(d, job_id, task=None, evals=True, resumed=True):
    os.makedirs(d, exist_ok=True)
    spec(d, os.path.basename(d))
    lines, attempts = [], []
    # Attempt 1: steps 10..80, checkpoints at 30 and 60, requeued at step 84.
    a1_start = T0
    for step in range(10, 90, 10):
        lines.append(train_line(step, a1_start + step * 2, 2.0 - step / 100))
        if evals and step in (40, 80):
            lines.append(eval_line(step, a1_start + step * 2 + 1, 0.3 + step / 400))
    checkpoint(d, 30, a1_start + 61)
    checkpoint(d, 60, a1_start + 121)
    a1_end = a1_start + 170
    attempts.append({'job_id': job_id, 'array_task_id': task, 'restart': 0,
                     'nodes': 'node' + EVIL, 'start': iso(a1_start), 'end': iso(a1_end),
                     'exit_status': 75, 'reason': 'requeued', 'last_step': 60})
    if resumed:
        # Attempt 2 resumes from step 60: steps 70 and 80 (and the eval at 80) are written again.
        a2_start = a1_end + 40
        for step in range(70, 130, 10):
            lines.append(train_line(step, a2_start + (step - 60) * 2, 1.9 - step / 100))
            if evals and step in (80, 120):
                lines.append(eval_line(step, a2_start + (step - 60) * 2 + 1, 0.35 + step / 400))
        checkpoint(d, 90, a2_start + 61)
        checkpoint(d, 120, a2_start + 121)
        a2_end = a2_start + 130
        attempts.append({'job_id': job_id, 'array_task_id': task, 'restart': 1,
                         'nodes': 'node02', 'start': iso(a2_start), 'end': iso(a2_end),
                         'exit_status': 0, 'reason': 'completed', 'last_step': 120})
    # Not committed: a step directory without its manifest, and a save in progress.
    os.makedirs(os.path.join(d, 'checkpoints', 'step-000000100'))
    os.makedirs(os.path.join(d, 'checkpoints', '.step-000000110.tmp'))
    jsonl(os.path.join(d, 'metrics.jsonl'), lines)
    jsonl(os.path.join(d, 'attempts.jsonl'), attempts)


def nodeloss(d, job_id):
    os.makedirs(d, exist_ok=True)
    spec(d, os.path.basename(d))
    lines, attempts = [], []
    # (restart, step, world size, first and last training step, checkpoint steps, how it ended)
    steps = [
        (0, 0, 4, 10, 50, [30], {'reason': 'node_lost', 'lost_nodes': 'node2',
                                'added_nodes': 'node4', 'detected_by': 'slurmd on node2 ' + EVIL,
                                'stop_s': 1.3}),
        (0, 1, 4, 40, 90, [60], {'reason': 'node_lost', 'lost_nodes': 'node3', 'added_nodes': '',
                                'detected_by': 'the NCCL watchdog timed out on rank 2',
                                'stop_s': 2.5}),
        (0, 2, 2, 70, 100, [90], {'reason': 'node_lost_requeued', 'lost_nodes': 'node4',
                                  'added_nodes': '', 'detected_by': 'srun reported node4 down',
                                  'stop_s': 0.8}),
        (1, 0, 2, 100, 130, [120], {'reason': 'completed'}),
    ]
    t = T0
    for i, (restart, step_no, world, first, last, ckpts, end) in enumerate(steps):
        start = t
        for step in range(first, last + 10, 10):
            lines.append(train_line(step, start + 5 + (step - first) * 2, 2.0 - step / 100))
            if step % 40 == 0:
                lines.append(eval_line(step, start + 6 + (step - first) * 2, 0.3 + step / 400))
        for c in ckpts:
            checkpoint(d, c, start + 6 + (c - first) * 2)
        end_t = start + 10 + (last - first) * 2
        a = {'job_id': job_id, 'array_task_id': None, 'restart': restart, 'nodes': 'node[1-3]',
             'start': iso(start), 'end': iso(end_t),
             'exit_status': 0 if end['reason'] == 'completed' else 76, 'reason': end['reason'],
             'last_step': ckpts[-1]}
        if i > 0:
            a['step'] = step_no  # the first line is in the older format, without it
            a['world_size'] = world
        if end['reason'] != 'completed':
            detected = end_t - 2
            nxt = end_t + 15
            a.update(end)
            a['detected'] = iso(detected)[:-1] + '.412Z'
            # From detection to the next step's first training line, or null after a requeue.
            a['recover_s'] = None if end['reason'] == 'node_lost_requeued' else round(nxt + 5 - detected - 0.412, 3)
            t = nxt
        attempts.append(a)
    jsonl(os.path.join(d, 'metrics.jsonl'), lines)
    jsonl(os.path.join(d, 'attempts.jsonl'), attempts)


def chain(d):
    os.makedirs(d, exist_ok=True)
    spec(d, os.path.basename(d))
    lines, attempts = [], []
    t = T0
    # (job, first and last training step, checkpoint, reason): each job resumes from the last.
    links = [('4711', 10, 40, 40, 'chained'), ('4712', 50, 80, 80, 'chained'),
             ('4713', 90, 120, 120, 'completed')]
    for restart, (job, first, last, ckpt, reason) in enumerate(links):
        for step in range(first, last + 10, 10):
            lines.append(train_line(step, t + 5 + (step - first) * 2, 2.0 - step / 100))
        checkpoint(d, ckpt, t + 6 + (last - first) * 2)
        end = t + 10 + (last - first) * 2
        attempts.append({'job_id': job, 'array_task_id': None, 'restart': restart,
                         'nodes': 'node01', 'start': iso(t), 'end': iso(end),
                         'exit_status': 0 if reason == 'completed' else 75, 'reason': reason,
                         'last_step': ckpt, 'step': 0, 'world_size': 2})
        t = end + 30
    jsonl(os.path.join(d, 'metrics.jsonl'), lines)
    jsonl(os.path.join(d, 'attempts.jsonl'), attempts)
    submissions = [{'job_id': job, 'submitted_at': iso(T0 - 5 + 100 * i), 'array_tasks': 0}
                   for i, (job, *_) in enumerate(links)]
    for before, s in zip(submissions, submissions[1:]):
        s['chained_from'] = before['job_id']
    jsonl(os.path.join(d, 'submissions.jsonl'), submissions)


def submission(d, job_id, array_tasks):
    with open(os.path.join(d, 'submissions.jsonl'), 'w') as f:
        f.write(json.dumps({'job_id': job_id, 'submitted_at': iso(T0 - 5),
                            'array_tasks': array_tasks}) + '\n')


def main():
    kind, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    if kind == 'preempted':
        preempted(d, '4711')
        submission(d, '4711', 0)
    elif kind == 'array':
        spec(d, os.path.basename(d))
        submission(d, '4800', 2)
        preempted(os.path.join(d, 'task-000'), '4800_0', task=0)
        preempted(os.path.join(d, 'task-001'), '4800_1', task=1, evals=False, resumed=False)
    elif kind == 'nodeloss':
        nodeloss(d, '4711')
        submission(d, '4711', 0)
    elif kind == 'chain':
        chain(d)
    elif kind == 'empty':
        spec(d, os.path.basename(d))
        submission(d, '4900', 0)
    else:
        sys.exit('unknown fixture ' + kind)


if __name__ == '__main__':
    main()
