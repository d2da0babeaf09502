"""The web side of training jobs: the process's set-up (setup.py), waiting for a page's runs on the
event loop (wait.py), the runner child process beside the server (runner_process.py) and the paths
API (paths_api.py). The store is app/stores/jobs, the client and runner app/engine/jobs."""
