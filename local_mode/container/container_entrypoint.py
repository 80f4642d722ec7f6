"""A job whose request names a ContainerEntrypoint runs that command on each local host in place of the training
toolkit, as SageMaker runs it in the container: SDK v3 ModelTrainer's drivers (`/bin/bash -c "chmod +x
/opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"`), with the `code` and
`sm_drivers` channels downloaded like any channel.

The command and the drivers it runs hard-code what a container has: /opt/ml (sagemaker-train's container_drivers:
scripts/environment.py, common/utils.py), the host names `algo-N` and the master `algo-1:7777` (environment.py). So
each host runs in a mount namespace of its own, where its folder is /opt/ml (the machine's other /opt entries stay
visible) and /etc/hosts names the job's hosts, and a job's hosts share a network namespace of their own, where port
7777 is theirs alone whatever else runs on the machine (util-linux's `unshare` and `nsenter`, iproute2's `ip`; as
root, or through a user namespace where the kernel lets users create them). The machine's loopback ports the job calls
(a tracking server's) are relayed into that network (loopback_relay).

Which Python the command finds is the job's (`python3`, `pip3`, `torchrun` from its environment's bin folder first on
PATH), standing in for the image's. In the project's environment the code's requirements.txt is not installed (as
with the toolkit launch, docs/local-mode.md): a `python3` placed before it runs every command but the drivers'
requirements step, which it reports skipped.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from local_mode.container.container_layout import HostFolder
from local_mode.container.launcher import Launch, threads_per_process

# The service sets it in every container (sagemaker-train's environment.py requires it).
JOB_NAME_VARIABLE = "TRAINING_JOB_NAME"
# The drivers' requirements step (sagemaker-core's install_requirements.py, copied beside the drivers by ModelTrainer).
REQUIREMENTS_STEP = "/opt/ml/input/data/sm_drivers/scripts/install_requirements.py"
_TOOLS = ("unshare", "nsenter", "ip", "mount", "sh")
# The job's network: loopback up, then held open until local mode closes the holder's stdin.
_HOLD_NETWORK = "ip link set lo up && echo up && exec cat > /dev/null"
# In a host's mount namespace ($1 its folder, $2 the job's hosts file, $3 an empty folder; then the command): /opt
# seen from $3, a tmpfs over /opt with each entry it held bound back (the job's Python or the project may live there),
# the host's folder as /opt/ml, the hosts file as /etc/hosts.
_AS_CONTAINER = """set -e
host_root=$1 hosts_file=$2 opt_view=$3
shift 3
mount --bind /opt "$opt_view"
cd "$opt_view"
mount -t tmpfs tmpfs /opt
for name in * .[!.]*; do
  if [ "$name" = ml ] || { [ ! -e "$name" ] && [ ! -L "$name" ]; }; then continue; fi
  if [ -L "$name" ]; then ln -s "$(readlink "$name")" "/opt/$name"
  elif [ -d "$name" ]; then mkdir "/opt/$name" && mount --rbind "$name" "/opt/$name"
  else touch "/opt/$name" && mount --bind "$name" "/opt/$name"; fi
done
mkdir /opt/ml
mount --bind "$host_root" /opt/ml
mount --bind "$hosts_file" /etc/hosts
cd /
exec "$@"
"""


class ContainerUnavailable(RuntimeError):
    """This machine cannot give the hosts their namespaces; the message says why and what to do."""


def container_command(algorithm_specification: dict[str, Any]) -> list[str] | None:
    """ContainerEntrypoint followed by ContainerArguments; None when the request names no entrypoint (the image's
    training toolkit starts the job)."""
    entrypoint = algorithm_specification.get("ContainerEntrypoint")
    if not entrypoint:
        return None
    return [*entrypoint, *algorithm_specification.get("ContainerArguments", [])]


def _user_namespace() -> list[str]:
    """Without root, the namespaces belong to a user namespace of this user's own, in which it is root."""
    return [] if os.geteuid() == 0 else ["--user", "--map-root-user"]


class JobNetwork:
    """A network namespace for one job's hosts, with loopback up, held by a process until closed."""

    def __init__(self) -> None:
        self._holder: subprocess.Popen[str] | None = None

    def __enter__(self) -> "JobNetwork":
        missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
        if missing:
            raise ContainerUnavailable(_unavailable(f"{', '.join(missing)} not found on PATH (util-linux, iproute2)"))
        self._holder = subprocess.Popen(["unshare", *_user_namespace(), "--net", "sh", "-c", _HOLD_NETWORK],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        assert self._holder.stdout is not None and self._holder.stderr is not None
        if self._holder.stdout.readline().strip() != "up":
            self._holder.wait()
            raise ContainerUnavailable(_unavailable(self._holder.stderr.read().strip() or "unshare --net failed"))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._holder is not None:
            assert self._holder.stdin is not None
            self._holder.stdin.close()
            self._holder.wait()

    def enter(self) -> list[str]:
        """The command prefix that runs a command inside the job's network (and its user namespace, if any)."""
        assert self._holder is not None, "enter the JobNetwork first"
        user = ["--user", "--preserve-credentials"] if os.geteuid() != 0 else []
        return ["nsenter", "--target", str(self._holder.pid), *user, "--net", "--"]


def require_namespaces() -> None:
    """Raise ContainerUnavailable, naming the fix, unless this machine can give a job's hosts their namespaces."""
    with JobNetwork():
        pass


def _unavailable(problem: str) -> str:
    return (f"local mode runs a request's ContainerEntrypoint (SDK v3 ModelTrainer's drivers) with each host in a "
            f"mount namespace and the job in a network namespace of its own, and could not: {problem}. Run as root "
            f"on Linux, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
            f"kernel.apparmor_restrict_unprivileged_userns=0), or use launch 'toolkit'")


def container_environment(request: dict[str, Any], *, host_count: int) -> dict[str, str]:
    """What every host's container starts with: local mode's defaults (threads for the hosts' one process each,
    unbuffered output), under the job's `Environment`, under what the service sets."""
    return {"OMP_NUM_THREADS": threads_per_process(host_count), "PYTHONUNBUFFERED": "1",
            **request.get("Environment", {}), JOB_NAME_VARIABLE: request["TrainingJobName"]}


def plan_container_launches(command: list[str], *, folders: dict[str, HostFolder],
                            environments: dict[str, dict[str, str]], network: JobNetwork, python: str,
                            install_requirements: bool) -> list[Launch]:
    """One process per host, algo-1 first, running `command` as that host's container; its Python is `python`'s
    environment, where the drivers' requirements step runs only when `install_requirements`."""
    job_dir = next(iter(folders.values())).root.parent
    container = job_dir / "container"
    container.mkdir(parents=True, exist_ok=True)
    hosts_file = container / "hosts"
    hosts_file.write_text(_hosts_file(list(folders)))
    image_path = [str(Path(python).parent), os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")]
    if not install_requirements:
        image_path.insert(0, str(_python_skipping_requirements(container / "bin", python)))
    launches = []
    for host, folder in folders.items():
        opt_view = container / f"{host}-opt"
        opt_view.mkdir(exist_ok=True)
        argv = [*network.enter(), "unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _AS_CONTAINER,
                "sh", str(folder.root), str(hosts_file), str(opt_view), *command]
        launches.append(Launch(host, argv, {**environments[host], "PATH": os.pathsep.join(image_path)}, folder.root))
    return launches


def _hosts_file(hosts: list[str]) -> str:
    """/etc/hosts of a job's hosts: every host name on loopback (one network), this machine's name too, which gloo
    resolves to pick its address; and loopback's IPv4-mapped form, as which torch's rendezvous store sees its clients
    (its reverse lookup would otherwise fail, and warn, at each connection: the network has no DNS)."""
    names = ["localhost", socket.gethostname(), *hosts]
    return "".join(f"127.0.0.1 {name}\n" for name in names) + "::1 localhost\n::ffff:127.0.0.1 localhost\n"


def _python_skipping_requirements(folder: Path, python: str) -> Path:
    """A `python3` that runs `python` with its arguments, except the drivers' requirements step."""
    folder.mkdir(parents=True, exist_ok=True)
    stand_in = folder / "python3"
    stand_in.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = {REQUIREMENTS_STEP} ]; then\n'
        f'  echo "local mode: $2 not installed: the job runs in this project\'s environment (docs/local-mode.md)"\n'
        "  exit 0\n"
        "fi\n"
        f"exec {shlex.quote(python)} \"$@\"\n")
    stand_in.chmod(0o755)
    return folder

