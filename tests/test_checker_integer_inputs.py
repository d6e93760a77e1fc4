"""The checker machinery accepts integer input tensors (token ids, lengths): an untouched integer
input is not reported as modified, and an in-place edit of one still is."""
import torch

from transformer_course.exercises._core import PASS, Exercise


def _cases():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(2, 5, generator=g), torch.randint(0, 5, (2, 3), generator=g)),
            (torch.randn(3, 4, generator=g), torch.randint(0, 4, (3, 2), generator=g)),
            (torch.randn(1, 6, generator=g), torch.randint(0, 6, (1, 4), generator=g))]


def _pick(x, ids):
    return x.gather(1, ids)  # (B, K) float


PICK = Exercise("pick", _pick, _cases)


def test_integer_inputs_are_not_reported_as_modified():
    verdict = PICK.evaluate(_pick)
    assert verdict.passed and PASS in verdict.message


def test_in_place_edit_of_an_integer_input_is_still_caught():
    def edits_ids(x, ids):
        ids.clamp_(max=0)
        return _pick(x, ids)

    verdict = PICK.evaluate(edits_ids)
    assert not verdict.passed and "修改了传入的张量" in verdict.message
