"""fuse-elementwise: each producer-consumer chain of elementwise `linalg.generic` ops becomes one op.

An elementwise op is a `linalg.generic` whose iterators are all parallel, with one result whose
indexing map is a permutation and a body that reads no output argument. Broadcasts are included:
a consumer may read its producer through a map that drops or pins dimensions. Fusing a producer
into its consumer gives one generic over the consumer's loops whose body computes the producer's
value inline, instead of writing it to a tensor and reading it back.

Policy, so that fusion never adds work:
- A producer with one user, read once and one-to-one, is fused into it, whatever it computes.
- A producer with several users, or one its consumer reads through a broadcast (which computes
  it again for every broadcast element) or through two different maps, is fused only when it is
  cheap: at most CHEAP_OPS body ops, none of them a `math` function or a division. Each
  elementwise user then gets its own copy, and the producer stays only for users that are not
  elementwise (a matmul, a reduction). An expensive producer is kept and computed once.
- A gather (a generic whose body reads a tensor at computed indices, as an embedding lookup does)
  is left alone: fused with the adds after GPT-2's two embedding lookups, it made IREE 3.13's
  CUDA backend fail on the layer norm that follows ("failed to distribute").
- An op that reads the result of a reduction is left alone, as producer and as consumer. IREE
  builds a dispatch around each reduction and fuses such epilogues into it, and it recognises
  softmax (max, subtract, exp, sum, divide) only while those ops are separate: fusing them here
  cost the example encoder two dispatches.

When the stage is dumped, the pass writes `<NN>-<stage>.fusion-report.md` (each fused chain and
the ops that went into it, linalg op counts before and after) and the data-flow graph before and
after as `.fusion-before.dot` and `.fusion-after.dot` (and `.svg` where Graphviz's `dot` runs;
see fusion_report.py).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg

from .fusion_report import Graph, label_number, write_fusion_report
from .pass_api import Pass, PassRun

CHEAP_OPS = 3  # body ops of a producer that may be computed again rather than read from memory
RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")
EXPENSIVE_OPS = ("arith.divf", "arith.divsi", "arith.divui", "arith.remf", "arith.remsi", "arith.remui")
MEMBERS = "kiln.fused_ops"  # on each linalg op while the pass runs: the ops fused into it, by label


def run(module: ir.Operation, pass_run: PassRun) -> None:
    chains: list[list[str]] = []
    before_graphs, after_graphs = [], []
    for function in _functions(module):
        for number, op in enumerate(_linalg_ops(function), start=1):
            _set_members(op, [f"#{number} {_describe(op)}"])
        before_graphs.append(_graph(function))
        for consumer in _linalg_ops(function):  # producers come first: each chain grows from its start
            while (fused := _fuse_a_producer_into(consumer)) is not None:
                consumer = fused
        after_graphs.append(_graph(function))
        chains += [_members(op) for op in _linalg_ops(function) if len(_members(op)) > 1]
        for op in _linalg_ops(function):
            del op.attributes[MEMBERS]
    write_fusion_report(pass_run, chains, before_graphs, after_graphs)


def _fuse_a_producer_into(consumer: ir.Operation) -> ir.Operation | None:
    """The op that replaces `consumer` once one of its producers is fused into it; None if none can be."""
    if not _is_elementwise(consumer, allow_several_results=True):
        return None
    for operand in list(consumer.operands)[: _input_count(consumer)]:
        owner = operand.owner
        if not isinstance(owner, ir.OpView) or not _can_fuse(owner.operation, consumer):
            continue
        producer = owner.operation
        if _has_users_outside(producer, consumer):
            producer = _duplicate_for(producer, consumer)  # the copy carries the producer's members
        members = sorted(set(_members(producer) + _members(consumer)), key=label_number)  # a copy joins once
        fused = _fuse(producer, consumer)
        _set_members(fused, members)
        return fused
    return None


def _members(op: ir.Operation) -> list[str]:
    return [ir.StringAttr(name).value for name in op.attributes[MEMBERS]]


def _set_members(op: ir.Operation, names: list[str]) -> None:
    op.attributes[MEMBERS] = ir.ArrayAttr.get([ir.StringAttr.get(name) for name in names])


def _can_fuse(producer: ir.Operation, consumer: ir.Operation) -> bool:
    if producer.name != "linalg.generic" or not _is_elementwise(producer, allow_several_results=False):
        return False
    if _reads_reduction(producer) or _reads_reduction(consumer):
        return False  # a reduction's epilogue: IREE's to place (and softmax is raised only when whole)
    if _gathers(producer) or _gathers(consumer):
        return False  # an embedding lookup: fused with its neighbours, IREE 3.13's CUDA backend fails
    maps = _maps(consumer)
    slots = [index for index, value in enumerate(consumer.operands) if value == producer.result]
    if any(index >= _input_count(consumer) for index in slots):
        return False  # the consumer writes into the producer's result
    if not all(_is_dims_or_constants(maps[index]) for index in slots):
        return False
    loops = [_loops_map(producer, maps[index]) for index in slots]
    if any(indexing is None for indexing in loops):
        return False
    broadcasts = any(not maps[index].is_permutation for index in slots)
    computed_more_than_once = len({str(indexing) for indexing in loops}) > 1
    if broadcasts or computed_more_than_once or _has_users_outside(producer, consumer):
        return _is_cheap(producer)
    return True


def _fuse(producer: ir.Operation, consumer: ir.Operation) -> ir.Operation:
    """Replace `consumer` by one generic that computes `producer` inline; returns the new op.

    The fused op runs over the consumer's loops. Its inputs are the consumer's other inputs and
    the producer's inputs, re-indexed through the map the consumer reads the producer with; its
    body computes the producer once per distinct such map, then the consumer.
    """
    inputs: list[tuple[ir.Value, ir.AffineMap]] = []  # the fused op's (tensor, indexing map), no repeats

    def input_index(value: ir.Value, indexing: ir.AffineMap) -> int:
        if (value, indexing) not in inputs:
            inputs.append((value, indexing))
        return inputs.index((value, indexing))

    input_count = _input_count(consumer)
    consumer_maps = _maps(consumer)
    producer_inputs = list(zip(list(producer.operands)[: _input_count(producer)], _maps(producer), strict=False))
    # Each consumer input: the fused input it becomes, or the loops map it reads the producer through;
    # each such map: one inline copy of the producer, reading its inputs re-indexed by that map.
    sources: list[int | ir.AffineMap] = []
    copies: dict[str, tuple[ir.AffineMap, list[int]]] = {}
    for value, indexing in zip(list(consumer.operands)[:input_count], consumer_maps, strict=False):
        loops = _loops_map(producer, indexing) if value == producer.result else None
        if loops is None:
            sources.append(input_index(value, indexing))
            continue
        sources.append(loops)
        if str(loops) not in copies:
            indices = [input_index(operand, _compose(operand_map, loops)) for operand, operand_map in producer_inputs]
            copies[str(loops)] = (loops, indices)

    with ir.InsertionPoint(consumer), ir.Location.fused([producer.location, consumer.location]):
        fused = linalg.GenericOp(
            result_tensors=[result.type for result in consumer.results],
            inputs=[value for value, _ in inputs],
            outputs=list(consumer.operands)[input_count:],
            indexing_maps=[indexing for _, indexing in inputs] + consumer_maps[input_count:],
            iterator_types=consumer.attributes["iterator_types"],
        )
    consumer_block, producer_block = consumer.regions[0].blocks[0], producer.regions[0].blocks[0]
    outputs = list(consumer_block.arguments)[input_count:]
    block = fused.regions[0].blocks.append(
        *[_element_type(value) for value, _ in inputs], *[argument.type for argument in outputs]
    )
    computed = {}  # each inline copy of the producer: the value it yields
    for key, (loops, indices) in copies.items():
        arguments = dict(zip(producer_block.arguments, [block.arguments[index] for index in indices], strict=False))
        computed[key] = _clone_body(producer_block, block, arguments, loops)[0]
    values = {
        argument: computed[str(source)] if isinstance(source, ir.AffineMap) else block.arguments[source]
        for argument, source in zip(consumer_block.arguments, sources, strict=False)
    }
    values.update(zip(outputs, list(block.arguments)[len(inputs) :], strict=True))
    _clone_body(consumer_block, block, values, None, keep_yield=True)

    for old, new in zip(consumer.results, fused.results, strict=True):
        old.replace_all_uses_with(new)
    consumer.erase()
    if not list(producer.result.uses):
        _erase_with_unused_init(producer)
    return fused.operation


def _clone_body(
    source: ir.Block,
    target: ir.Block,
    values: dict[ir.Value, ir.Value],
    loops: ir.AffineMap | None,
    keep_yield: bool = False,
) -> list[ir.Value]:
    """Clone `source`'s ops into `target` with operands renamed by `values`; return what it yields.

    `loops` maps the fused op's loops to the source op's, for its `linalg.index` ops.
    """
    for op in source.operations:
        if op.name == "linalg.yield" and not keep_yield:
            return [values.get(value, value) for value in op.operands]
        clone = op.operation.clone(ip=ir.InsertionPoint(target))
        for index, operand in enumerate(clone.operands):
            if operand in values:
                clone.operands[index] = values[operand]
        if op.name == "linalg.index" and loops is not None:
            dimension = op.attributes["dim"].value
            position = ir.AffineDimExpr(loops.results[dimension]).position
            clone.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), position)
        values.update(zip(op.results, clone.results, strict=True))
    return []


def _duplicate_for(producer: ir.Operation, consumer: ir.Operation) -> ir.Operation:
    """A copy of `producer` just before `consumer`, which from now on reads the copy."""
    copy = producer.clone(ip=ir.InsertionPoint(consumer)).operation
    for index, value in enumerate(consumer.operands):
        if value == producer.result:
            consumer.operands[index] = copy.result
    return copy


def _erase_with_unused_init(producer: ir.Operation) -> None:
    inits = list(producer.operands)[_input_count(producer) :]
    producer.erase()
    for init in inits:
        owner = init.owner
        if isinstance(owner, ir.OpView) and owner.operation.name == "tensor.empty" and not list(init.uses):
            owner.operation.erase()


def _is_elementwise(op: ir.Operation, allow_several_results: bool) -> bool:
    if op.name != "linalg.generic" or (len(op.results) != 1 and not allow_several_results):
        return False
    iterators = [str(attribute) for attribute in op.attributes["iterator_types"]]
    if not all(iterator == "#linalg.iterator_type<parallel>" for iterator in iterators):
        return False
    maps = _maps(op)
    if not all(indexing.is_permutation for indexing in maps[_input_count(op) :]):
        return False
    block = op.regions[0].blocks[0]
    outputs = list(block.arguments)[_input_count(op) :]
    if any(list(argument.uses) for argument in outputs):
        return False  # reads its output: an update in place, not a pure function of its inputs
    return not any(nested.regions for nested in block.operations)


def _reads_reduction(op: ir.Operation) -> bool:
    """Whether an input of `op` is the result of a reduction (seen through reshapes)."""
    for value in list(op.operands)[: _input_count(op)]:
        owner = _through_reshapes(value)
        if owner is not None and _has_reduction(owner):
            return True
    return False


def _gathers(op: ir.Operation) -> bool:
    """Whether `op` reads a tensor at computed indices (`tensor.extract` in its body): a gather."""
    return any(nested.name == "tensor.extract" for nested in op.regions[0].blocks[0].operations)


def _through_reshapes(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    while isinstance(owner, ir.OpView) and owner.operation.name in RESHAPES:
        owner = owner.operation.operands[0].owner
    return owner.operation if isinstance(owner, ir.OpView) else None


def _has_reduction(op: ir.Operation) -> bool:
    if op.name == "linalg.reduce":
        return True
    if op.name != "linalg.generic":
        return False
    return any(str(iterator) == "#linalg.iterator_type<reduction>" for iterator in op.attributes["iterator_types"])


def _is_cheap(producer: ir.Operation) -> bool:
    ops = [op for op in _body(producer) if op.name not in ("linalg.yield", "linalg.index")]
    return len(ops) <= CHEAP_OPS and not any(op.name.startswith("math.") or op.name in EXPENSIVE_OPS for op in ops)


def _has_users_outside(producer: ir.Operation, consumer: ir.Operation) -> bool:
    return any(use.owner.operation != consumer for use in producer.result.uses)


def _loops_map(producer: ir.Operation, consumer_map: ir.AffineMap) -> ir.AffineMap | None:
    """How the consumer's loops index the producer's loops, through the producer's output map.

    None when a loop of the producer that its body reads with `linalg.index` would not be a plain
    loop of the consumer.
    """
    output_map = _maps(producer)[-1]  # a permutation: output dimension j is loop output_map[j]
    loops: list[ir.AffineExpr] = [ir.AffineExpr.get_constant(0)] * output_map.n_dims
    for position, expression in enumerate(output_map.results):
        loops[ir.AffineDimExpr(expression).position] = consumer_map.results[position]
    indexed = {op.attributes["dim"].value for op in _body(producer) if op.name == "linalg.index"}
    if any(not isinstance(loops[dimension], ir.AffineDimExpr) for dimension in indexed):
        return None
    return ir.AffineMap.get(consumer_map.n_dims, 0, loops)


def _compose(indexing: ir.AffineMap, loops: ir.AffineMap) -> ir.AffineMap:
    """`indexing` after `loops`: a producer operand's map in the fused op's loops."""
    return ir.AffineMap.get(loops.n_dims, 0, [expression.compose(loops) for expression in indexing.results])


def _is_dims_or_constants(indexing: ir.AffineMap) -> bool:
    return all(isinstance(expression, (ir.AffineDimExpr, ir.AffineConstantExpr)) for expression in indexing.results)


def _maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(attribute).value for attribute in op.attributes["indexing_maps"]]


def _input_count(op: ir.Operation) -> int:
    return len(op.regions[0].blocks[0].arguments) - len(op.results)


def _element_type(value: ir.Value) -> ir.Type:
    return ir.ShapedType(value.type).element_type


def _body(op: ir.Operation) -> list[ir.Operation]:
    return [nested.operation for nested in op.regions[0].blocks[0].operations]


def _functions(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in module.regions[0].blocks[0].operations if op.operation.name == "func.func"]


def _linalg_ops(function: ir.Operation) -> list[ir.Operation]:
    """The function's top-level linalg ops, in order (not the yields and indexes in their bodies)."""
    return [op.operation for op in function.regions[0].blocks[0].operations if op.operation.name.startswith("linalg.")]


def _describe(op: ir.Operation) -> str:
    if op.name != "linalg.generic":
        return op.name.removeprefix("linalg.")
    names = [nested.name.split(".", 1)[1] for nested in _body(op) if nested.name not in ("linalg.yield", "linalg.index")]
    if names:
        return ("reduce " if _has_reduction(op) else "") + "/".join(dict.fromkeys(names))
    maps = _maps(op)
    return "copy" if all(indexing.is_permutation for indexing in maps) else "broadcast"


def _graph(function: ir.Operation) -> Graph:
    """The function's data flow, linalg ops labelled by the ops fused into them."""
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    block = function.regions[0].blocks[0]
    for index in range(len(block.arguments)):
        nodes[f"in{index}"] = f"input {index}"
    ids: list[tuple[ir.Operation, str]] = []
    for op in block.operations:
        op = op.operation
        if op.name in ("tensor.empty", "arith.constant") or not op.name.startswith(("linalg.", "tensor.", "func.return")):
            continue
        node = "out" if op.name == "func.return" else f"n{len(ids)}"
        ids.append((op, node))
        nodes[node] = "outputs" if node == "out" else "\n".join(_members(op)) if MEMBERS in op.attributes else op.name
        for operand in op.operands:
            owner = operand.owner
            if isinstance(owner, ir.Block):
                edges.append((f"in{ir.BlockArgument(operand).arg_number}", node))
                continue
            edges += [(source, node) for producer, source in ids if producer == owner.operation]
    return Graph(nodes, list(dict.fromkeys(edges)), len(_linalg_ops(function)))


PASS = Pass(
    name="fuse-elementwise",
    summary="fuse chains of elementwise linalg.generic ops (broadcasts included) into one op each",
    level="linalg",
    run=run,
)
