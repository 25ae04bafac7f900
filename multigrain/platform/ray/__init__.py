"""Ray machinery: sweeps over workers, a model-serving service, an evaluator pool, cluster jobs.

Domain-free: a trial is "train this resolved spec into this run directory"; a served model is
"an archive that turns ``{"text": ...}`` into JSON".

Modules: ``cluster`` (connecting to Ray, the runtime env of jobs, errors raised on workers),
``sweep`` (planning and running a grid x seeds as Ray tasks) with ``sweep_report`` (its tables
and ranking), ``train`` (one training data-parallel on Ray Train workers), ``archives`` (the checks shared by serving and evaluation), ``serve`` (the Ray
Serve predictor), ``evaluate`` (the evaluator actor pool) and ``jobs`` (the Ray Jobs client).
Importing this package, or any of its modules, imports no Ray: each function imports what it
uses.

Tracking. Workers never write the MLflow store. A trial returns its result dict (what
``train_experiment`` wrote to ``metrics.json``) to the driver, and the driver alone calls
``tracking.replay``; evaluator actors return metrics and the driver logs the leaderboard rows.
One writer per store is what MLflow's SQLite backend needs (concurrent writers to one SQLite
file lock and fail), and it keeps workers free of database credentials. The alternative for a
cluster is one MLflow tracking server (``mlflow server --backend-store-uri ...``) whose
``http://`` URI is given to ``--tracking-uri``: the driver still does the logging here, but any
process of the cluster (e.g. ``multigrain train`` run as a Ray job) can log to the same server.
"""
