"""Stock ``fairseq-train`` (fairseq_cli.train.cli_main) for one data-parallel rank, with two
observation hooks for the tests: fairseq silences every rank but 0 after distributed init, so
INFO logging is switched back on (every rank prints its per-update JSON loss); and after each
update the rank logs a SHA-1 of its parameters, which must be identical on all ranks."""
import hashlib
import json
import logging

import torch
from fairseq import trainer
from fairseq.distributed import utils as distributed_utils
from fairseq_cli import train

logger = logging.getLogger("production_rank_runner")
_distributed_init = distributed_utils.distributed_init
_train_step = trainer.Trainer.train_step


def distributed_init_logging_every_rank(cfg):
    rank = _distributed_init(cfg)
    logging.getLogger().setLevel(logging.INFO)
    return rank


def train_step_with_fingerprint(self, samples, raise_oom=False):
    logging_output = _train_step(self, samples, raise_oom)
    digest = hashlib.sha1()
    for name, parameter in sorted(self.model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().to(torch.float32).contiguous().numpy().tobytes())
    grads = [name for name, p in self.model.named_parameters() if p.requires_grad and p.grad is None]
    logger.info("fingerprint %s", json.dumps({
        "rank": self.data_parallel_rank, "num_updates": self.get_num_updates(),
        "params_sha1": digest.hexdigest(), "params_without_grad": grads,
    }))
    return logging_output


if __name__ == "__main__":
    distributed_utils.distributed_init = distributed_init_logging_every_rank
    trainer.Trainer.train_step = train_step_with_fingerprint
    train.cli_main()
