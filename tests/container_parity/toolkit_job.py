"""One training job through the sagemaker-training toolkit, run by a container environment's own Python.

    SAGEMAKER_BASE_DIR=<host folder> <env>/bin/python toolkit_job.py <sourcedir.tar.gz> <launcher> <processes>

As the PyTorch DLC's entry does: the toolkit reads /opt/ml (here SAGEMAKER_BASE_DIR), unpacks the bundle into the
code folder, runs `python -m pip install -r requirements.txt` there, and launches the entry point with the
hyperparameters as arguments. `torch_distributed` uses the toolkit's torchrun runner. `mpi` is the SMDDP runner's
launch on one host -- mpirun starting `python -m mpi4py <entry point>` per rank -- without its SSH daemon and EFA
options, which only multi-host GPU clusters use. `processes` stands in for the GPUs a host would have.
"""

from __future__ import annotations

import sys

from sagemaker_training import entry_point, environment, process, runner


class SingleHostMpiRunner(process.ProcessRunner):
    def _python_command(self) -> list[str]:
        # Ranks abort together on an uncaught exception, as the SMDDP runner arranges.
        return super()._python_command() + ["-m", "mpi4py"]

    def _create_command(self) -> list[str]:
        return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--tag-output", "-np",
                str(self._processes_per_host), *super()._create_command()]


def main(bundle: str, launcher: str, processes: int) -> None:
    env = environment.Environment()
    args, env_vars = env.to_cmd_args(), env.to_env_vars()
    if launcher == "torch_distributed":
        runner_type = runner.RunnerType.TorchDistributed
    elif launcher == "mpi":
        runner_type = SingleHostMpiRunner(env.user_entry_point, args, env_vars, processes)
    else:
        raise SystemExit(f"launcher={launcher!r}: use 'torch_distributed' or 'mpi'")
    entry_point.run(uri=bundle, user_entry_point=env.user_entry_point, args=args, env_vars=env_vars,
                    capture_error=True, runner_type=runner_type,
                    extra_opts={"sagemaker_mpi_num_of_processes_per_host": processes})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
