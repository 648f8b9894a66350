"""The WGSL path's kernel descriptors: the schema, each contract true and false, the device's
limits (exceeded → a refusal naming the limit; a large tensor tiled where a variant can), the
row bands, and the templates they render. No device needed."""

from __future__ import annotations

import copy
import re
from importlib import resources

import pytest

from wai_dispatch.paths.wgsl.descriptor import (
    DescriptorInvalid,
    ShapeRefused,
    descriptors,
    render,
    validate,
)

#: A device's limits, as lavapipe reports them.
LIMITS = {
    "maxComputeWorkgroupsPerDimension": 65535,
    "maxStorageBufferBindingSize": 134217728,
    "maxBufferSize": 2147483647,
    "maxUniformBufferBindingSize": 65536,
    "maxComputeInvocationsPerWorkgroup": 1024,
    "maxComputeWorkgroupSizeX": 1024,
    "maxStorageBuffersPerShaderStage": 32,
}
DECONV = {"kernel": 5, "stride": 2, "padding": 2, "output_padding": 1}


def deconv_plan(limits=LIMITS, x=(1, 192, 16, 24), attrs=DECONV, wdtype="int8", **shapes):
    shapes = {"X": list(x), "weight": [x[1], 128, 5, 5], "bias": [128], **shapes}
    dtypes = {"X": "int32", "weight": wdtype, "bias": "int32"}
    return descriptors()["conv_transpose2d"].plan(shapes, dtypes, attrs, limits)


def test_every_descriptor_validates_and_every_op_has_a_kernel() -> None:
    by_op = descriptors()
    assert set(by_op) == {
        "channel_affine",
        "conv2d",
        "conv_transpose2d",
        "requantize",
        "igdn",
        "add",
        "mul",
    }
    folder = resources.files("wai_dispatch.paths.wgsl").joinpath("descriptors")
    names = sorted(e.name for e in folder.iterdir() if e.name.endswith(".json"))
    assert names == [f"{d}.json" for d in sorted({d.name for d in by_op.values()})]


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d.pop("derive"), "'derive' is a required property"),
        (lambda d: d["tunables"].update(WORKGROUP_SIZE=0), "/tunables/WORKGROUP_SIZE"),
        (lambda d: d["ops"].append("softmax"), "/ops/1"),
        (lambda d: d["variants"][0].update(template="../x.wgsl.j2"), "/variants/0/template"),
        (lambda d: d["variants"][0]["limits"].update(maxBogus="1"), "/variants/0/limits"),
        (lambda d: d["typeConstraints"].update(T=["float32"]), "/typeConstraints/T/0"),
        (lambda d: d.update(extra=1), "Additional properties"),
    ],
)
def test_the_schema_rejects_a_bad_descriptor(mutate, where) -> None:
    doc = copy.deepcopy(dict(descriptors()["conv2d"].doc))
    mutate(doc)
    with pytest.raises(DescriptorInvalid, match=re.escape(where)):
        validate(doc)


def test_a_descriptor_must_name_binding_sets_and_templates_that_exist() -> None:
    doc = copy.deepcopy(dict(descriptors()["conv2d"].doc))
    doc["variants"][0]["bindingSet"] = "missing"
    with pytest.raises(DescriptorInvalid, match="no binding set 'missing'"):
        validate(doc)
    doc = copy.deepcopy(dict(descriptors()["conv2d"].doc))
    doc["variants"][0]["template"] = "nothing.wgsl.j2"
    with pytest.raises(DescriptorInvalid, match="no template"):
        validate(doc)


def test_expressions_are_evaluated_safely_not_by_eval() -> None:
    doc = copy.deepcopy(dict(descriptors()["conv2d"].doc))
    doc["derive"]["inC"] = "__import__('os').getpid()"
    with pytest.raises(DescriptorInvalid, match="does not evaluate"):
        validate(doc).plan(
            {"X": [1, 2, 4, 4], "weight": [3, 2, 3, 3], "bias": [3]},
            {"X": "int32", "weight": "int8", "bias": "int32"},
            {"kernel": 3, "padding": 1},
            LIMITS,
        )


def test_the_whole_variant_holds_and_derives_the_output_shape() -> None:
    plan = deconv_plan()
    assert plan.variant["name"] == "whole" and plan.whole
    assert plan.out_shape == (1, 128, 32, 48)  # (16-1)*2 - 4 + 5 + 1
    (band,) = plan.bands()
    assert (band.out_row0, band.rows, band.in_row0, band.in_rows) == (0, 32, 0, 16)
    fields = {name: value for name, _, value in plan.uniform(band)}
    assert fields == {
        "inC": 192,
        "inW": 24,
        "inRow0": 0,
        "inRows": 16,
        "outC": 128,
        "outW": 48,
        "outRow0": 0,
        "rows": 32,
        "groups": 32,
        "kernel": 5,
        "stride": 2,
        "padding": 2,
    }
    # one invocation per position and group of 4 output channels (the tunable)
    assert plan.dispatch(band) == (128 // 4 * 32 * 48 // 64, 1)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"x": (2, 192, 16, 24)}, "shapeContract"),  # batch 2
        ({"weight": [100, 128, 5, 5]}, "shapeContract"),  # Ci differs from the input's
        ({"bias": [64]}, "shapeContract"),
        ({"attrs": {**DECONV, "output_padding": 2}}, "outside constraints"),
        ({"attrs": {**DECONV, "stride": 3}}, "outside constraints"),
        ({"attrs": {**DECONV, "padding": 5}}, "shapeContract"),  # p < k
        ({"attrs": {"kernel": 5, "stride": 2, "padding": 2}}, "outside constraints"),
        ({"wdtype": "int32"}, "outside constraints"),  # conv weights are int8 or int16
        ({"x": (1, 192, 24)}, "outside constraints"),  # rank 3
    ],
)
def test_each_contract_false_refuses_with_dispatch_shape_mismatch(change, why) -> None:
    with pytest.raises(ShapeRefused, match=why) as info:
        deconv_plan(**change)
    assert info.value.code == "dispatch_shape_mismatch"
    assert info.value.limits == ()


def test_contracts_of_every_kernel_true_and_false() -> None:
    d = descriptors()
    x = [1, 3, 4, 5]
    ok = {
        "channel_affine": ({"scale": [3], "offset": [3]}, {}),
        "requantize": ({"multiplier": [3], "shift": [3]}, {"clamp": [-5, 5]}),
        "igdn": (
            {"gamma": [3, 3], "beta": [3], "shift": [3]},
            {"square_shift": 4, "clamp": [0, 9]},
        ),
        "add": ({"X2": x}, {}),
        "conv2d": ({"weight": [2, 3, 3, 3], "bias": [2]}, {"kernel": 3, "padding": 1}),
    }
    for op, (params, attrs) in ok.items():
        shapes = {"X": x, **params}
        dtypes = {role: "int32" for role in shapes}
        if op == "conv2d":
            dtypes["weight"] = "int16"
        plan = d[op].plan(shapes, dtypes, attrs, LIMITS, op)
        assert plan.variant["name"] == "whole"
        assert plan.out_shape[2:] == (4, 5)
        wrong = {**shapes, next(iter(params)): [7, 7]}  # a parameter of the wrong shape
        with pytest.raises(ShapeRefused):
            d[op].plan(wrong, dtypes, attrs, LIMITS, op)
    with pytest.raises(ShapeRefused, match="outside constraints"):  # clamp lo > hi
        d["requantize"].plan(
            {"X": x, "multiplier": [3], "shift": [3]},
            dict.fromkeys(("X", "multiplier", "shift"), "int32"),
            {"clamp": [5, -5]},
            LIMITS,
        )
    with pytest.raises(ShapeRefused, match="shapeContract"):  # conv2d kernels are odd
        d["conv2d"].plan(
            {"X": x, "weight": [2, 3, 2, 2], "bias": [2]},
            {"X": "int32", "weight": "int8", "bias": "int32"},
            {"kernel": 2, "padding": 0},
            LIMITS,
        )


def test_a_large_latent_is_tiled_into_row_bands() -> None:
    small = {**LIMITS, "maxStorageBufferBindingSize": 4 << 20}
    plan = deconv_plan(small, x=(1, 192, 64, 64))  # output 128 x 128 x 128 x 4 B = 8 MiB
    assert plan.variant["name"] == "banded" and not plan.whole
    bands = list(plan.bands())
    assert sum(b.rows for b in bands) == 128 and len(bands) > 1
    for band in bands:  # each band's bindings fit the limit, and its input rows cover its taps
        assert 128 * band.rows * 128 * 4 <= 4 << 20
        assert 192 * band.in_rows * 64 * 4 <= 4 << 20
        assert band.in_row0 == max(0, -(-(band.out_row0 + 2 - 5 + 1) // 2))
        assert band.in_row0 + band.in_rows - 1 == min(63, (band.out_row0 + band.rows - 1 + 2) // 2)


@pytest.mark.parametrize(
    ("limit", "value"),
    [
        ("maxStorageBufferBindingSize", 1000),  # even the weights do not fit one binding
        ("maxComputeInvocationsPerWorkgroup", 32),  # the workgroup of 64 does not fit
        ("maxComputeWorkgroupSizeX", 16),
    ],
)
def test_limits_exceeded_refuse_naming_the_limit(limit, value) -> None:
    with pytest.raises(ShapeRefused, match=limit) as info:
        deconv_plan({**LIMITS, limit: value})
    assert limit in info.value.limits
    assert f"{limit} " in str(info.value) and f"> {value}" in str(info.value)


def test_a_dispatch_too_large_for_one_dimension_is_tiled_then_refused() -> None:
    few = {**LIMITS, "maxComputeWorkgroupsPerDimension": 8}
    plan = deconv_plan(few, x=(1, 192, 8, 8))  # 128 / 4 x 16 x 16 / 64 = 128 groups > 8 x 8
    assert plan.variant["name"] == "banded"
    for band in plan.bands():
        x, y = plan.dispatch(band)
        assert x <= 8 and y <= 8 and x * y * 64 >= 128 // 4 * band.rows * 16
    with pytest.raises(ShapeRefused, match="maxComputeWorkgroupsPerDimension"):
        deconv_plan({**LIMITS, "maxComputeWorkgroupsPerDimension": 1}, x=(1, 192, 8, 8))


def test_templates_declare_exactly_the_descriptors_bindings() -> None:
    for op, descriptor in descriptors().items():
        for variant in descriptor.doc["variants"]:
            source = render(descriptor.name, variant["name"], op)
            bindings = descriptor.doc["bindingSets"][variant["bindingSet"]]
            declared = re.findall(r"@binding\((\d+)\) var<[^>]+> (\w+)", source)
            assert declared == [(str(i), b["name"]) for i, b in enumerate(bindings)]
            assert "@workgroup_size(64)" in source
            assert "f32" not in source and "f16" not in source  # integers only
    assert "a[idx] * b[idx]" in render("elementwise", "whole", "mul")
    assert "a[idx] + b[idx]" in render("elementwise", "whole", "add")
