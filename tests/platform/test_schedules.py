"""Learning-rate schedules (issue 40): ``inverse_sqrt`` against Vaswani et al.'s eq. 3 at many
steps, its warm-up counted in steps whatever the run's length, a resumed optimizer + schedule
continuing exactly, and ``linear_warmup`` with ``warmup_steps``."""
import math

import pytest
import torch

from multigrain.platform.kinds import Scheduler
from multigrain.platform.optim import InverseSqrt, LinearWarmupDecay


def optimizer(lr=2e-3):
    return torch.optim.Adam([torch.nn.Parameter(torch.ones(3))], lr=lr, betas=(0.9, 0.98))


def rates(schedule, n):
    out = []
    for _ in range(n):
        out.append(schedule.optimizer.param_groups[0]["lr"])
        schedule.optimizer.step()
        schedule.step()
    return out


def vaswani(step, d_model, warmup):
    """eq. 3 of "Attention is all you need": d^-0.5 * min(n^-0.5, n * warmup^-1.5), n = step + 1."""
    n = step + 1
    return d_model ** -0.5 * min(n ** -0.5, n * warmup ** -1.5)


@pytest.mark.parametrize("warmup", [1, 4, 100])
def test_inverse_sqrt_is_vaswanis_equation_with_its_peak_as_lr(warmup):
    d_model = 512
    peak = vaswani(warmup - 1, d_model, warmup)  # eq. 3's largest rate, at n = warmup
    got = rates(InverseSqrt(optimizer(peak), num_training_steps=7, warmup_steps=warmup), 3 * warmup + 50)
    for step, lr in enumerate(got):
        assert lr == pytest.approx(vaswani(step, d_model, warmup), rel=1e-9), step
    assert max(got) == pytest.approx(peak) and got.index(max(got)) == warmup - 1


def test_inverse_sqrt_at_chosen_steps():
    got = rates(InverseSqrt(optimizer(1e-3), num_training_steps=1, warmup_steps=500), 2000)
    assert got[0] == pytest.approx(1e-3 / 500)
    assert got[249] == pytest.approx(0.5e-3)
    assert got[499] == pytest.approx(1e-3)
    assert got[1999] == pytest.approx(1e-3 * math.sqrt(500 / 2000))  # half the peak at 4x the warm-up
    assert rates(InverseSqrt(optimizer(1.0), 1, warmup_steps=0), 4) == pytest.approx([1, 2 ** -0.5, 3 ** -0.5, 0.5])


def test_inverse_sqrt_ignores_the_runs_length_so_a_run_can_be_extended():
    short = rates(InverseSqrt(optimizer(), num_training_steps=100, warmup_steps=30), 100)
    long = rates(InverseSqrt(optimizer(), num_training_steps=10_000, warmup_steps=30), 100)
    assert short == long
    assert Scheduler.by_name("inverse_sqrt") is InverseSqrt
    assert InverseSqrt.uses_num_training_steps is False and LinearWarmupDecay.uses_num_training_steps is True
    with pytest.raises(ValueError, match="warmup_steps"):
        InverseSqrt(optimizer(), 1, warmup_steps=-1)


def test_a_resumed_schedule_continues_where_it_stopped():
    whole = InverseSqrt(optimizer(), num_training_steps=0, warmup_steps=20)
    expected = rates(whole, 60)

    first = InverseSqrt(optimizer(), num_training_steps=0, warmup_steps=20)
    head = rates(first, 25)
    saved_optimizer, saved_schedule = first.optimizer.state_dict(), first.state_dict()
    resumed = InverseSqrt(optimizer(), num_training_steps=0, warmup_steps=20)  # as the trainer: built, then loaded
    resumed.optimizer.load_state_dict(saved_optimizer)
    resumed.load_state_dict(saved_schedule)
    assert head + rates(resumed, 35) == pytest.approx(expected)


def test_linear_warmup_counts_warmup_steps_and_decays_to_the_final_ratio():
    got = rates(LinearWarmupDecay(optimizer(1.0), num_training_steps=110, warmup_steps=10, final_ratio=0.1), 111)
    assert got[:10] == pytest.approx([(s + 1) / 11 for s in range(10)])
    for step in range(10, 111):
        assert got[step] == pytest.approx(0.1 + 0.9 * max(0.0, (110 - step) / 100)), step
