"""The MLflow run of a tracked run directory, read back through MLflow's own Python client and
compared with the run directory (docs/tracking.md):

    mlflow_check.py URI EXPERIMENT RUN_DIR [--status S] [--attempts N]

Checks: the experiment holds exactly one run (tagged with RUN_DIR); each metric's history has
every step of metrics.jsonl once, in order, with the value of the step's first record there
(a resumed attempt writes a step again); the params are the frozen spec's keys; the tags count
the ledger's attempts and list its causes; the report page is an artifact; with --status, the
run's status. Prints the run as JSON (its REST dump: info, params, tags, metric histories) on
stdout; exits 1 naming the first difference."""
import json
import math
import os
import sys

from mlflow.tracking import MlflowClient

KEYS = {
    "train": {"loss": "train.loss", "lr": "train.lr", "images_per_s": "train.images_per_s",
              "loss_scale": "train.loss_scale"},
    "eval": {"loss": "eval.loss", "top1": "eval.top1", "top5": "eval.top5"},
}


def fail(message):
    print(f"mlflow_check: {message}", file=sys.stderr)
    sys.exit(1)


def expected_metrics(run_dir):
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            for field, key in KEYS.get(record["kind"], {}).items():
                if field not in record:
                    continue
                value = record[field]
                value = math.nan if value is None else float(value)
                steps = out.setdefault(key, {})
                steps.setdefault(record["step"], value)  # the first record of a step
    return {key: sorted(steps.items()) for key, steps in out.items()}


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        fail(__doc__)
    uri, experiment, run_dir = args[:3]
    options = dict(zip(args[3::2], args[4::2]))
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        fail(f"no experiment {experiment!r} on {uri}")
    runs = client.search_runs([exp.experiment_id])
    if len(runs) != 1:
        fail(f"experiment {experiment!r} holds {len(runs)} runs, not 1")
    run = runs[0]
    run_dir = os.path.abspath(run_dir)
    if run.data.tags.get("hpctrain.run_dir") != run_dir:
        fail(f"the run's hpctrain.run_dir tag is {run.data.tags.get('hpctrain.run_dir')!r}")
    dump = {"info": {"run_id": run.info.run_id, "status": run.info.status,
                     "experiment_id": run.info.experiment_id,
                     "artifact_uri": run.info.artifact_uri},
            "params": run.data.params, "tags": {k: v for k, v in run.data.tags.items()
                                                if k.startswith("hpctrain.")},
            "metrics": {}}
    for key, want in expected_metrics(run_dir).items():
        history = sorted(client.get_metric_history(run.info.run_id, key),
                         key=lambda m: (m.step, m.timestamp))
        got = [(m.step, m.value) for m in history]
        dump["metrics"][key] = [[m.step, m.value, m.timestamp] for m in history]
        steps = [s for s, _ in got]
        if len(steps) != len(set(steps)):
            fail(f"{key}: a step sent twice: {steps}")
        if [s for s, _ in want] != steps:
            fail(f"{key}: steps {steps}, metrics.jsonl has {[s for s, _ in want]}")
        for (step, w), (_, g) in zip(want, got):
            if not same(w, g):
                fail(f"{key} at step {step}: {g} on the server, {w} in metrics.jsonl")
    if "job.name" not in run.data.params:
        fail(f"the params lack job.name: {sorted(run.data.params)[:10]}")
    attempts = set()
    causes = []
    path = os.path.join(run_dir, "attempts.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                a = json.loads(line)
                attempts.add((a["job_id"], a["restart"]))
                causes.append(a.get("cause", a["reason"]))
    if run.data.tags.get("hpctrain.attempts") != str(len(attempts)):
        fail(f"hpctrain.attempts is {run.data.tags.get('hpctrain.attempts')}, "
             f"the ledger has {len(attempts)}")
    if run.data.tags.get("hpctrain.causes", "") != ",".join(causes):
        fail(f"hpctrain.causes is {run.data.tags.get('hpctrain.causes')!r}, "
             f"the ledger's are {','.join(causes)!r}")
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id)]
    if "report.html" not in artifacts:
        fail(f"no report.html among the artifacts {artifacts}")
    if "--status" in options and run.info.status != options["--status"]:
        fail(f"status {run.info.status}, expected {options['--status']}")
    json.dump(dump, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
