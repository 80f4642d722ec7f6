"""Which images an ECR lifecycle policy expires, evaluated as the Amazon ECR user guide describes.

"Lifecycle policy evaluation rules" (docs.aws.amazon.com/AmazonECR/latest/userguide/LifecyclePolicies.html):
rules apply in ascending `rulePriority`; an image that matches the tagging requirements of a rule cannot be expired
by a rule with a lower priority (a higher number), though that rule still counts it; `imageCountMoreThan` keeps the
newest `countNumber` images the rule selects and expires the older ones; with `tagPatternList` (`*` is the only
wildcard) or `tagPrefixList`, an image is selected when every listed pattern or prefix matches one of its tags.
moto validates a policy's syntax but evaluates none, so the tests evaluate the synthesized policy with this.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Image:
    digest: str
    tags: tuple[str, ...]
    pushed_days_ago: int


def expired_images(policy_text: str, images: list[Image]) -> set[str]:
    """The digests of `images` the policy `policy_text` expires."""
    rules = sorted(json.loads(policy_text)["rules"], key=lambda rule: rule["rulePriority"])
    newest_first = sorted(images, key=lambda image: image.pushed_days_ago)
    claimed: set[str] = set()  # matched the tagging requirements of a rule already evaluated
    expired: set[str] = set()
    for rule in rules:
        selection = rule["selection"]
        selected = [image for image in newest_first if _selects(selection, image)]
        expired |= {image.digest for image in _over_limit(selection, selected)} - claimed
        claimed |= {image.digest for image in selected}
    return expired


def _selects(selection: dict[str, Any], image: Image) -> bool:
    status = selection["tagStatus"]
    if status == "any":
        return True
    if status == "untagged":
        return not image.tags
    patterns = selection.get("tagPatternList")
    if patterns is not None:
        return all(any(fnmatch.fnmatchcase(tag, pattern) for tag in image.tags) for pattern in patterns)
    return all(any(tag.startswith(prefix) for tag in image.tags) for prefix in selection["tagPrefixList"])


def _over_limit(selection: dict[str, Any], selected: list[Image]) -> list[Image]:
    if selection["countType"] == "imageCountMoreThan":
        return selected[selection["countNumber"]:]
    assert selection["countType"] == "sinceImagePushed" and selection["countUnit"] == "days", selection
    return [image for image in selected if image.pushed_days_ago > selection["countNumber"]]
