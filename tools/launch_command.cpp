// See launch_command.h.
#include "tools/launch_command.h"

#include <iostream>
#include <memory>

#include "pipebal/distributed/launcher.h"
#include "tools/command_line.h"

namespace pipebal::tools {

void add_launch_command(CLI::App& app) {
  auto options = std::make_shared<distributed::LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "Run a command as N processes per node, with torchrun's environment");
  cmd->add_option("--nproc-per-node,--nproc_per_node", options->nproc_per_node,
                  "processes on this node")
      ->capture_default_str();
  cmd->add_option("--nnodes", options->nnodes, "nodes in all")->capture_default_str();
  cmd->add_option("--node-rank,--node_rank", options->node_rank, "this node's index")
      ->capture_default_str();
  cmd->add_option("--master-addr,--master_addr", options->master_addr,
                  "host of rank 0, which serves the rendezvous")
      ->capture_default_str();
  cmd->add_option("--master-port,--master_port", options->master_port,
                  "port of the rendezvous (0: any free port, one node only)")
      ->capture_default_str();
  cmd->add_option("--grace", options->grace_s,
                  "seconds the others get to stop after the first failure, before SIGKILL")
      ->capture_default_str();
  cmd->add_option("--fold-within", options->fold_window_s,
                  "seconds a line the processes print on stderr is held, so that one several "
                  "print alike is shown once (0: they write to stderr themselves)")
      ->capture_default_str();
  cmd->add_flag("--bind-cores", options->bind_cores,
                "pin each process to its own share of this node's cores (the launcher's logical "
                "CPUs, split in order), so that the processes do not share cores");
  // Not required() here: check() says what to give, with an example.
  cmd->add_option("command", options->command, "the command each process runs, after --");
  cmd->footer(
      "Each process gets RANK, WORLD_SIZE (nproc-per-node x nnodes), LOCAL_RANK,\n"
      "LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and the rest of what torchrun sets for a\n"
      "worker (GROUP_*, ROLE_*, TORCHELASTIC_*; OMP_NUM_THREADS=1 with several processes, unless\n"
      "set or --bind-cores); `pipebal train` then runs stage RANK. The first process to fail stops "
      "the others; the launcher exits\n"
      "with its status. What the processes print on stderr comes through the launcher line by\n"
      "line: a line that several print alike is shown once, naming the ranks that printed it\n"
      "(\"pipebal: error: ranks 0, 1: ...\"). With --bind-cores, local rank r of N runs on the\n"
      "r-th of N runs of the launcher's cores (on 8 cores, 2 processes: 0-3 and 4-7).\n"
      "Examples:\n"
      "  pipebal launch --nproc-per-node 2 -- pipebal train --plan plan.json -o run.json\n"
      "  # two hosts, two stages each:\n"
      "  pipebal launch --nproc-per-node 2 --nnodes 2 --node-rank 0 --master-addr host0 \\\n"
      "      --master-port 29500 -- pipebal train --balance 3,2,2,2 -o run.json");
  cmd->callback([options] {
    distributed::check(*options);
    throw ExitStatus{distributed::launch(*options, std::cerr)};
  });
}

}  // namespace pipebal::tools
