"""Layouts and settings described in plain words by someone who does not know their names, rewritten as the names
the rules read ("splitting each layer's weights across GPUs" is tensor parallel, "a full copy of the model on each
GPU" is DDP, "without the sequences glued together into one long stream" is without packing).

A description taken back ("not splitting the model itself") never becomes the layout it names: not splitting the
model at all is a full copy on each GPU, DDP, unless the sentence names the layout it wants instead. A question how
to split ("how would the model be divided between them?") asks for a plan: its words are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in

_CARD = r"(?:gpus?|cards?|devices?)"
# Negations written as contractions: "don't", "didn't", "shouldn't", "wouldnt".
NT = r"(?:do|does|did|would|should|could|will|wo|must|is|are|was|were|ca)n'?t"
_ACROSS = r"(?=\s+(?:across|over|between|on|among|onto)\b)"
# The verbs of cutting something into parts ("split", "slice", "divide", "break up", "spread", "partition").
SPLIT = (r"(?:split(?:s|ting)?|slic(?:e|es|ed|ing)|divid(?:e|es|ed|ing)|partition(?:s|ed|ing)?|cut(?:s|ting)?|"
         r"chop(?:s|ped|ping)?(?:\s+up)?|spread(?:s|ing)?|distribut(?:e|es|ed|ing)|break(?:s|ing)?\s+up|"
         r"broken\s+up)")  # fmt: skip
# One layer's own matrices (each card computing part of every layer), not the set of layers (pipeline's stages).
_EACH_LAYER = (r"(?:(?:each|every|all)\s+(?:single\s+|individual\s+)?(?:layer|weight\s+matrix|matrix|matmul)(?:'s|s)?|"
               r"(?:the\s+|all\s+the\s+|its\s+)(?:weight\s+)?matri(?:x|ces)|(?:the\s+)?individual\s+layers|"
               r"(?:the\s+)?layers\s+themselves)(?:\s+(?:weights|params|parameters|weight\s+matrices|matrices|math|"
               r"matmuls|tensors))?(?:\s+of\s+the\s+model)?")  # fmt: skip
# A share of something a card takes: "half of", "a slice of", "its own chunk of".
_SHARE = (r"(?:half|part|parts|a\s+fraction|(?:a|one|its\s+own|their\s+own|its)\s+(?:part|slice|piece|share|chunk|"
          r"portion|segment|section|fraction|bit))\s+of")  # fmt: skip
# (and the verb's plain form, after "have", "let" or "make": "have each GPU compute half of every matmul")
_HOLDS = (r"(?:does|doing|computes|computing|handles|handling|gets|getting|holds|holding|keeps|keeping|takes|taking|"
          r"owns|owning|stores|storing|processes|processing|sees|seeing|works\s+on|working\s+on|runs|running|has|"
          r"having|carries|carrying|do|compute|handle|get|hold|keep|take|own|store|process|see|work\s+on|run|have|"
          r"carry)")  # fmt: skip
# A matrix product by its names: "matmul", "matrix multiply", "matrix multiplication", "GEMM".
_MATMUL = r"(?:matmuls?|matrix[- ]multipl(?:y|ies|ications?)|gemms?|weight\s+matrix|matrix)"
# Cut in parts, said of one thing: "cut in two", "split in half", "sliced into 4 pieces".
_IN_PARTS = r"\s+(?:in|into)\s+(?:2|two|half|halves|\d+\s+(?:pieces|parts|halves|shards)|pieces|parts)\b"
# A layer's own weights: "the layer weights themselves", "each layer's matrices".
_LAYER_WEIGHTS = (r"(?:the\s+)?(?:layer|layers'?|(?:each|every)\s+layer'?s)\s+(?:weights|weight\s+matrices|matrices|"
                  r"params|parameters)(?:\s+themselves)?")  # fmt: skip
_FIRST_CARD = rf"(?:(?:1|one|a|the first)\s+{_CARD}|{_CARD}\s*#?\s*0)"
_NODE = r"(?:node|machine|box|host|server|computer)"
_NODES = r"(?:nodes|machines|boxes|hosts|servers|computers)"
_REPLICATED = r"(?:replicat\w*|cop(?:y|ied|ies)|duplicat\w*|mirror\w*|clon\w*)"
# Which of a count of cards: "each of the 2 GPUs", "every one of our four cards".
_OF_COUNT = (r"(?:(?:one\s+)?of\s+(?:the\s+|our\s+|my\s+|those\s+|these\s+)?"
             r"(?P<of_count>\d+|two|three|four|eight|both)\s+)?")  # fmt: skip
LAYOUT_DESCRIPTIONS = [
    (  # HSDP: sharded inside a node, a replica per node ("shard within each node, replicate across nodes")
        rf"\bshard(?:s|ed|ing)?\s+(?:(?:the\s+)?(?:model|weights|params|parameters)\s+)?(?:with)?in(?:side)?\s+(?:each|a|"
        rf"every|the|one)\s+{_NODE}\b[^.;?!]{{0,40}}?\b{_REPLICATED}\s+(?:(?:it|them|that)\s+)?(?:across|over|between|"
        rf"among)\s+(?:the\s+)?{_NODES}\b|"
        rf"\b{_REPLICATED}\s+(?:(?:it|them|the\s+model)\s+)?(?:across|over|between|among)\s+(?:the\s+)?{_NODES}\b"
        rf"[^.;?!]{{0,40}}?\bshard(?:s|ed|ing)?\s+(?:(?:it|them)\s+)?(?:with)?in(?:side)?\s+(?:each|a|every|the|one)\s+"
        rf"{_NODE}\b",
        "hsdp",
        "hsdp",
    ),
    (  # each layer's matrices split: tensor parallel ("split each layer's weights across", "each layer is sliced")
        rf"\b{SPLIT}\s+(?:up\s+)?{_EACH_LAYER}(?:{_ACROSS}|{_IN_PARTS})|"
        rf"\b(?:each|every)\s+(?:single\s+)?(?:layer|{_MATMUL})(?:'s\s+(?:weights|params|parameters|"
        rf"matrices|math))?\s+(?:(?:is|being|gets|get)\s+)?{SPLIT}(?:\s+up)?(?:{_ACROSS}|{_IN_PARTS})|"
        # the weights first: "so the layer weights themselves get cut in two"
        rf"\b{_LAYER_WEIGHTS}\s+(?:(?:is|are|being|gets?|getting|should\s+be|will\s+be|to\s+be)\s+)?{SPLIT}(?:\s+up)?"
        rf"(?:{_ACROSS}|{_IN_PARTS})|"
        rf"\b{SPLIT}\s+(?:(?:the\s+)?model\s+)?(?:with)?in(?:side)?\s+(?:each|every)\s+layer\b|\bintra[- ]?layer\b|"
        # "the model is split by tensor on two GPUs"
        rf"\b{SPLIT}\s+(?:up\s+)?(?:by|along|per)\s+(?:the\s+)?tensors?{_ACROSS}",
        lambda found: _in_parts("tensor parallel", "tp", found),
        "tensor parallel",
    ),
    (  # each card doing part of every layer's math: tensor parallel ("each side carries half of every layer", of a
        # pair: half is a degree of 2)
        rf"\b(?:each|every)\s+(?:{_CARD}|side|one|rank|worker|process)\s+{_HOLDS}\s+{_SHARE}\s+"
        rf"(?:the\s+(?:math|matmuls?|computation|compute)|(?:the|every|each)\s+(?:layer|layers|{_MATMUL})"
        r"(?:'s\s+(?:weights|math))?)\b",
        lambda found: "tp=2" if re.search(r"\bhalf\s+of\b", found.group(0), re.I) else "with tensor parallel",
        "tensor parallel",
    ),
    (  # halves of the model on two cards: pipeline parallel of degree 2
        # ("first half on one GPU and second half on the other": the halves of what the sentence cut before)
        # (a card by its index: "on gpu 0 ... on gpu 1")
        rf"\b(?:the\s+)?first\s+half\s+(?:of\s+the\s+(?:layers|model)(?:\s+on\s+{_FIRST_CARD})?|on\s+{_FIRST_CARD})\s*,?"
        rf"\s*(?:(?:and|then)\s+)?(?:the\s+)?second\s+half(?:\s+of\s+the\s+(?:layers|model))?\s+on\s+(?:(?:the\s+other|another|the"
        rf"\s+second)(?:\s+(?:one|{_CARD}))?|{_CARD}\s*#?\s*1)\b",
        "pp=2 on 2 gpus",
        "pipeline parallel",
    ),
    (  # groups of consecutive layers on different cards: pipeline parallel
        rf"\b(?:put|place|spread|assign)\s+(?:the\s+|different\s+)?(?:(?:groups|blocks|chunks|sets)\s+of\s+)?layers\s+"
        rf"(?:on|to)\s+(?:different|separate|each)\s+{_CARD}\b|\b{SPLIT}\s+(?:up\s+)?the\s+layers{_ACROSS}|"
        rf"\b(?:the\s+)?layers\s+(?:are\s+|being\s+|get\s+)?{SPLIT}(?:\s+up)?{_ACROSS}|"
        rf"\b(?:each|every)\s+{_CARD}\s+{_HOLDS}\s+(?:a|its\s+own|one|some)?\s*(?:consecutive\s+|contiguous\s+)?"
        r"(?:group|block|chunk|range|set|slice|stack|run|share|few|handful|part|portion)\s+of\s+(?:the\s+)?"
        r"(?:consecutive\s+|contiguous\s+)?layers\b|"
        rf"\b(?:consecutive|contiguous|successive)\s+(?:groups|blocks|chunks|ranges|sets|runs|stacks)\s+of\s+layers\s+"
        rf"(?:on|per|for|to)\s+(?:each|every|a|its\s+own|different|separate)\s+{_CARD}\b|"
        rf"\bdifferent\s+layers\s+(?:on|per|for)\s+(?:each|every|different|separate)\s+{_CARD}\b|"
        rf"\b{SPLIT}\s+(?:up\s+)?(?:the\s+)?model\s+(?:by|along)\s+(?:its\s+)?(?:layers|depth)\b|"
        r"\blayer[- ]wise\s+split\b",
        "pipeline parallel",
        "pipeline parallel",
    ),
    (  # the model cut into stages: pipeline parallel, its degree the stages'
        rf"\b{SPLIT}\s+(?:up\s+)?(?:the\s+)?(?:(?:model|network)'?s\s+)?(?:model|network|layers)\s+(?:in|into)\s+"
        r"(?:(\d+)\s+)?(?:consecutive\s+)?(?:stages|chunks|pieces|parts|blocks|segments|halves)\b|"
        rf"\b(?:the\s+)?(?:model|network|layers)\s+(?:is\s+|are\s+|being\s+)?{SPLIT}\s+(?:in|into)\s+(?:(\d+)\s+)?"
        r"(?:consecutive\s+)?(?:stages|halves)\b",
        lambda found: (
            "pipeline parallel"
            + next(
                (f" with {n} stages" for n in found.groups()[1:] if n),
                " with 2 stages" if found.group(0).lower().endswith("halves") else "",
            )
        ),
        "pipeline parallel",
    ),
    (  # a full copy of the model on each card: DDP ("each of two GPUs keeps its own full copy")
        rf"\b(?:with\s+|give\s+|giving\s+)?(?:each|every)\s+{_OF_COUNT}{_CARD}\s+(?:(?:to|should|must|will|would|can)\s+)?"
        r"(?:(?:keeping|keeps|keep|having|has|have|holding|holds|hold|getting|gets|get|with)\s+)?(?:its|their|a)\s+"
        r"(?:own\s+(?:full\s+|whole\s+|complete\s+)?|full\s+|whole\s+|complete\s+)(?:copy|replica)(?:\s+of\s+the\s+model)?\b|"
        rf"\b(?:a\s+)?(?:full|whole|complete|entire)\s+cop(?:y|ies)\s+of\s+the\s+model\s+on\s+(?:each|every|all)\s+"
        rf"(?:of\s+the\s+)?{_CARD}\b|"
        rf"\b(?:the\s+)?(?:whole|full|entire|complete|same)\s+model\s+(?:(?:is\s+)?{_REPLICATED}\s+)?(?:on|to|onto|in)\s+"
        rf"(?:each|every|all)\s+(?:of\s+the\s+)?{_CARD}\b|"
        rf"\b{_REPLICATED}\s+(?:the\s+)?(?:whole\s+|full\s+|entire\s+)?model\s+(?:on|to|onto|across|over)\s+(?:each|"
        rf"every|all)\b|"
        rf"\b(?:each|every)\s+{_CARD}\s+(?:gets|has|holds|keeps|trains|runs|having|holding)\s+(?:the\s+)?(?:whole|full|"
        r"entire|complete)\s+model\b|"
        r"\b(?:only|just)\s+(?:split(?:ting)?|divid(?:e|ing)|shard(?:ing)?)\s+the\s+(?:data|batch(?:es)?)\b|"
        r"\b(?:only|just)\s+the\s+(?:data|batch(?:es)?)\s+(?:is\s+|gets\s+)?(?:split|divided|sharded)\b|"
        # the cards first, what each has after: "both our GPUs, each with its own full copy of the model"
        r"(?:(?<=gpus, )|(?<=gpus )|(?<=cards, )|(?<=cards )|(?<=devices, )|(?<=devices ))(?:each|every\s+one)\s+"
        r"(?:(?:of\s+them|one)\s+)?(?:with|having|holding|keeping|getting)\s+"
        r"(?:its|their|a)\s+(?:own\s+)?(?:full\s+|whole\s+|complete\s+)?(?:copy|replica)(?:\s+of\s+the\s+model)?\b|"
        # an analogy: every one given the whole thing, each doing different work ("every nurse getting the full chart
        # but each one handling different patients"); different layers or parts of the model would be a split model
        r"\b(?:each|every)\s+[a-z]+(?:\s+[a-z]+){0,3}?\s+(?:getting|gets|having|has|holding|holds|with|keeping)\s+"
        r"(?:the|a|its|their)\s+(?:own\s+)?(?:full|whole|complete|entire)\s+[a-z]+\b[^.;?!]{0,30}?\b(?:but|while|and|"
        r"yet)\s+(?:each(?:\s+one)?|every\s+one|each\s+of\s+them)\s+(?:working\s+on|works\s+on|"
        r"[a-z]+(?:ing|s))\s+(?:different|"
        r"separate|its\s+own|their\s+own)\s+(?!(?:layers?|stages?|parts?|pieces?|slices?|halves|matri\w*)\b)[a-z]+",
        lambda found: "with ddp" + (f" on {found.group('of_count')} gpus" if found.group("of_count") else ""),
        "ddp",
    ),
    (  # data parallel said to be sharded after its name ("the data parallel which is sharded", "data parallelism,
        # but sharded", "data parallel (sharded)"): FSDP; said not to be ("data parallel that is not sharded"): DDP
        r"\b(?:distributed\s+)?data[- ]parallel(?:ism)?\s*(?:,\s*|\(\s*|\s+)(?:(?:which|that)\s+(?:is|gets|'s)\s+|"
        r"(?:but|and|being|only|just)\s+)?(?P<unsharded>not\s+|never\s+|un)?(?:fully\s+)?sharded\b\)?"
        r"(?!\s*(?:checkpoints?|ckpts?|datasets?|data|files?|logs?)\b)",  # "and sharded checkpoints": a checkpoint's
        lambda found: "ddp" if found.group("unsharded") else "fsdp",
        "fsdp",
    ),
    (  # the data sharded across cards, said of a layout ("the data is sharded on two"; "only the data" is DDP's, above)
        rf"\b(?:the\s+)?data\s+(?:is\s+|are\s+|being\s+|gets?\s+)?sharded{_ACROSS}"
        r"(?!\s+\S+\s+(?:\S+\s+)?(?:files?|disks?|buckets?|directories|folders|parquets?)\b)",  # storage, no layout
        "sharded data",
        "fsdp",
    ),
    (  # each card holding a slice of the weights: FSDP
        rf"\b(?:with\s+)?(?:each|every)\s+{_CARD}\s+(?:(?:to|should|must|will|would|can|only)\s+)?(?:keeping|keeps|"
        r"keep|kept|holding|holds|hold|held|storing|stores|store|stored|owning|owns|own|gets|getting|get|got)\s+"
        r"(?:only\s+)?(?:a\s+|its\s+(?:own\s+)?)?(?:slice|shard|part|piece|share|portion|chunk|half|third|quarter|"
        r"fraction)\s+of\s+the\s+(?:model'?s\s+)?(?:weights|parameters|params|model)\b|"
        # the weights split first, what each card holds of them after: "the weights split up so each GPU only holds
        # a share of them"
        rf"\b(?:the\s+)?(?:model'?s?\s+)?(?:weights|parameters|params)\s+(?:(?:are|is|being|get|gets|getting)\s+)?"
        rf"(?:{SPLIT}|sharded)(?:\s+up)?\s*,?\s+(?:so\s+(?:that\s+)?|such\s+that\s+|where\s+|and\s+)?(?:each|every)\s+"
        rf"{_CARD}\s+(?:only\s+)?{_HOLDS}\s+(?:only\s+)?(?:a\s+|its\s+(?:own\s+)?)?(?:slice|shard|part|piece|share|"
        r"portion|chunk|fraction)(?:\s+of\s+(?:them|it|those))?\b",
        "with fsdp",
        "fsdp",
    ),
    (  # each card taking a part of every sequence: context parallel
        rf"\b{SPLIT}\s+(?:up\s+)?(?:the\s+|each\s+|every\s+)?(?:sequences?|tokens?|context)(?:\s+themselves|\s+itself)?"
        rf"(?=\s+(?:across|over|between|among)\b)|"
        rf"\b(?:the\s+|each\s+|every\s+)?(?:sequences?|context)\s+(?:(?:is|are|being|gets|get)\s+)?{SPLIT}(?:\s+up)?"
        rf"(?=\s+(?:across|over|between|among)\b)|"
        rf"\b(?:each|every)\s+{_CARD}\s+{_HOLDS}\s+{_SHARE}\s+(?:the|each|every)\s+(?:sequences?|context|tokens)\b|"
        # the sequences named, then each one cut, each card taking a piece: "my sequences are huge, so I'd like each
        # one cut into 2 pieces with each GPU handling one piece"
        rf"\beach(?:\s+one)?\s+(?:(?:to\s+)?(?:be|is|gets?|being)\s+)?{SPLIT}(?:\s+up)?"
        rf"\s+into\s+(?P<cp_parts>\d+|two|halves)\s+(?:pieces|parts|chunks|halves|segments)\b[^.;?!]{{0,20}}?"
        rf"\b(?:each|every)\s+{_CARD}\s+{_HOLDS}\s+(?:one|a)\b",
        lambda found: (
            _parts_of("context parallel", "cp", found, "cp_parts") if _of_sequences(found) else found.group(0)
        ),
        "context parallel",
    ),
]
# Sharding the model in plain words ("fully shard over 8 GPUs", "shard the model across 4 GPUs", "shard the weights
# and optimizer state", "with the weights sharded"): each card holds a slice of the training state, FSDP. What is
# sharded must be the model's state: a checkpoint's shards, "sharded checkpoints" or the dataset's are no layout.
_STATE = r"(?:model'?s?\s+)?(?:weights|params|parameters|optimi[sz]er(?:\s+states?)?|gradients|grads|training state)"
SHARD_THE_MODEL = (
    r"\bfully[- ]shard(?:ing)?\b(?!\s*(?:checkpoint|ckpt|dataset|data)\b)|"
    rf"\bshard(?:ing)?\s+(?:(?:the|its|all|all the|all of the|my|our|this)\s+)?{_STATE}"
    rf"(?:\s*(?:,|and|&|\+)\s*(?:the\s+)?{_STATE})*\b|"
    r"\bshard(?:ing)?\s+(?:(?:the|its|this|my|our|whole|entire)\s+)*(?:model|it|everything)?\s*"
    r"(?:(?:fully|completely|evenly|equally)\s+)?(?=(?:across|over|between|among|onto)\s)|"
    rf"\bsharded\s+{_STATE}\b|"
    # the state first, what happens to it after: "the weights sharded", "its parameters split between them"
    rf"\b{_STATE}\s+(?:(?:are|is|being|get|gets|getting|fully)\s+)*sharded\b|"
    # the model itself sharded over the cards: "with the model sharded across them"
    r"\b(?:the|its|our|my|whole|entire)\s+(?:(?:whole|entire)\s+)?model\s+(?:(?:is|being|gets|getting|fully)\s+)*"
    r"sharded(?=\s+(?:across|over|between|among|onto)\s)|"
    rf"\b{_STATE}\s+(?:(?:are|is|being|get|gets|getting)\s+)*(?:split|divided|spread|partitioned|distributed)"
    r"(?:\s+up)?(?=\s+(?:across|over|between|among)\b)"
)
# "Sharded" alone, said of a count of cards or processes: "on 2 gpus sharded", "4 procs, sharded", "sharded over 4
# gpus" (what is sharded unsaid: the model's state, FSDP). Not a sharded checkpoint or dataset.
_COUNTED = r"\d+\s+(?:gpus?|cards?|devices?|process(?:es)?|procs?|ranks?|workers?)"
SHARDED_COUNT = (rf"\b{_COUNTED}\s*,?\s+(?:fully\s+)?sharded\b(?!\s*(?:checkpoint|ckpt|dataset|data)\b)|"
                 # its manner said after the count: "split across 2 GPUs the sharded way"
                 rf"\b{_COUNTED}\s*,?\s+(?:in\s+)?(?:the|a)\s+sharded\s+(?:way|fashion|manner|style)\b|"
                 rf"(?<!fully )\bsharded\s+(?:across|over|on|between|among)\s+{_COUNTED}\b")  # fmt: skip
# Its degree said as ways: "4-way sharding", "shard the model 4 ways" (4 way fsdp: dp_shard=4).
# Or right after the verb, with its object unsaid: "shard 4 ways", "shard2", "shard=2" (as tp2 is tp=2).
SHARD_WAYS = (
    r"\b(\d+)[- ]ways?\s+(?:model\s+)?shard(?:ing|ed)\b(?!\s*(?:checkpoint|ckpt|dataset|data)\b)|"
    r"\bshard(?:ing)?\s+(?:(?:(?:the|its)\s+)?(?:model|it|everything|weights|params|parameters)\s+)?(\d+)[- ]ways?\b|"
    r"\bshard(?:ed|ing)?\s*(?:=|:|x|\s+of)?\s*(\d+)\b(?!\.\d|\s*(?:ways?|gpus?|cards?|devices?|process\w*|procs?|ranks?|"
    r"nodes?|steps?|trials?|checkpoints?|files?)\b)"
)
# The model not split at all, said with a negation: "not splitting the model itself", "without sharding the
# weights", "the model isn't divided". That is every card holding all of it, DDP; never the split it negates.
_WHOLE = (r"(?:(?:the|its|our|my)\s+)?(?:whole\s+|entire\s+)?(?:model'?s?\s+(?:weights|parameters|params)|model|"
          r"weights|parameters|params)")  # fmt: skip
# Or a part of it not split ("not splitting the layers", "without slicing the sequences"): no layout of its own.
_PART = r"(?:(?:the|its|each|every)\s+)?(?:layers?|sequences?|context|tokens)"
NOT_SPLIT = (
    rf"\b(?:not|without|no|never|{NT}|rather than|instead of)\s+(?:(?:be|being|want\s+to|need\s+to|to)\s+)?"
    rf"(?:{SPLIT}|shard(?:s|ed|ing)?)(?:\s+up)?\s+(?:{_WHOLE}|(?P<part>{_PART}))(?:\s+(?:itself|themselves|at all|"
    r"up))?\b|"
    rf"\bwithout\s+{_WHOLE}\s+being\s+(?:{SPLIT}|sharded)\b|"
    rf"\b{_WHOLE}\s+(?:(?:is|are|being|gets|get)\s+)?(?:not|never|isn'?t|aren'?t)\s+(?:being\s+)?(?:{SPLIT}|sharded)\b|"
    # said bare, of what the sentence described before it: "each gpu keeps a full copy, not split up"
    rf"(?P<bare>\b(?:not|never|{NT})\s+(?:be\s+|being\s+)?(?:{SPLIT}|sharded)(?:\s+up)?(?=\s*(?:[,.;!?)]|$)))"
)
# What a bare "not split" is said of when it is no model: "the data not split", "batches not sharded".
_NOT_THE_MODEL = r"\b(?:data|batch(?:es)?|dataset|sequences?|tokens|context|checkpoints?|files?)\s+(?:\w+\s+)?$"
# A question how to split asks for a plan ("how would you shard the model over 8 GPUs?"), not for a layout. "where"
# asks only opening its clause or after a verb that asks ("where should the weights be sharded?", "tell me where to
# shard"); after a noun or verb it describes ("a training where the parameters are sharded", "train where ...").
HOW_TO = (r"(?:\b(?:how|which way|best way|what way)\b|(?:^\W*|[,;:]\s*|\b(?:and|but|so|know|tell\s+me|wonder(?:ing)?|"
          r"ask(?:ing)?|decide|figure\s+out|show\s+me)\s+)where\b)[^.?!;]*$")  # fmt: skip
# For a description, "where" is no question: "training where every card has its own copy" describes DDP.
ASKED_HOW = r"\b(?:how|which way|best way|what way|smartest way|right way)\b[^.?!;]*$"


# A negation just before a description takes it back: "don't put the layers on different GPUs" is no pipeline.
# Up to three words may stand between ("without putting different layers on each GPU", "I don't want each GPU to
# hold a slice"), none of them a conjunction or punctuation that opens another clause ("no wait, and give each GPU a
# full copy" takes nothing back).
NEGATED = (rf"(?P<negated>\b(?:not|no|never|without|{NT}|rather than|instead of|avoid|avoiding)\s+"
           r"(?:(?!(?:and|but|then|so|just|instead|rather|wait|problem|worries)\b)[a-z']+\s+){0,3}?)?")  # fmt: skip


def _of_sequences(found: re.Match) -> bool:
    """Whether "each one" cut in parts is a sequence: the sentence named sequences just before it (or no "each one")."""
    if not found.group("cp_parts"):
        return True
    return bool(re.search(r"\bsequences\b[^.;?!]{0,60}$", found.string[: found.start()], re.I))


def _parts_of(words: str, dim: str, found: re.Match, group: str) -> str:
    """The layout's words, with the degree of the parts the description named, if it named them."""
    parts = found.group(group)
    if not parts:
        return words
    return f"{dim}={2 if parts in ('two', 'halves') else parts}"


def _in_parts(words: str, dim: str, found: re.Match) -> str:
    """The layout's words, with the degree the description ends on ("cut in two" is 2, "into 4 pieces" 4)."""
    parts = re.search(r"\b(?:in|into)\s+(\d+|two|half|halves)(?:\s+(?:pieces|parts|halves|shards))?$", found.group(0))
    if not parts:
        return words
    return f"{dim}={2 if parts.group(1) in ('two', 'half', 'halves') else parts.group(1)}"


def layouts_in_words(text: str, layout_names: str) -> str:
    """`text` with every layout it describes in words written as the layout's name ("no" and the name where a
    negation takes it back). `layout_names`: the pattern of every layout's name (grammar.LAYOUT_WORDS), which a
    negated description of the whole model defers to."""
    for pattern, words, name in LAYOUT_DESCRIPTIONS:
        text = re.sub(f"{NEGATED}(?:{pattern})", lambda found, w=words, n=name: _unless_asked(found, w, n), text,
                      flags=re.I)  # fmt: skip
    text = re.sub(NOT_SPLIT, lambda found: _not_split(found, layout_names), text, flags=re.I)
    text = re.sub(SHARD_WAYS, _sharding, text, flags=re.I)
    text = re.sub(SHARDED_COUNT, lambda found: re.sub(r"(?i)\bsharded\b", "fsdp", found.group(0)), text, flags=re.I)
    return re.sub(SHARD_THE_MODEL, _sharding, text, flags=re.I)


def _unless_asked(found: re.Match, words: str | Callable[[re.Match], str], name: str) -> str:
    """The layout's words for a description, "no <layout>" for one taken back, the words as said in a question how
    to split."""
    if re.search(ASKED_HOW, found.string[: found.start()], re.I):
        return found.group(0)
    if found.group("negated"):
        return f"no {name}"
    return words(found) if callable(words) else words


def _not_split(found: re.Match, layout_names: str) -> str:
    """The model not split: DDP where the sentence names no other layout ("but not splitting the model itself"),
    else nothing (the layout named says it: "fsdp, not splitting the layers" must not add DDP)."""
    rest = found.string[: found.start()] + " " + found.string[found.end() :]
    if re.search(ASKED_HOW, found.string[: found.start()], re.I):
        return found.group(0)
    if found.group("part") or (found.group("bare") and re.search(_NOT_THE_MODEL, found.string[: found.start()], re.I)):
        return " "
    named = re.search(rf"\b(?:{layout_names})\b", rest, re.I) or any(
        re.search(pattern, rest, re.I) for pattern, _, _ in LAYOUT_DESCRIPTIONS
    )
    return " " if named or re.search(SHARD_THE_MODEL, rest, re.I) else "with ddp"


def _sharding(found: re.Match) -> str:
    before = found.string[: found.start()]
    if re.search(HOW_TO, before, re.I) or re.search(r"\b(?:checkpoint|ckpt|dataset|data|file)s?\s+$", before, re.I):
        return found.group(0)  # a question how, or a checkpoint's or dataset's shard ("checkpoint shard 3")
    ways = next((g for g in found.groups() if g), None)
    return (f"{ways} way " if ways else "") + "fsdp" + (" " if found.group(0).endswith(" ") else "")


# Packing described by what it does: sequences glued, concatenated or joined together into one long stream. A
# negation inside the description ("the documents not concatenated") turns it off; one before it ("without the
# sequences being glued together") stays where it is, before "packing", where the switches read it.
_SEQUENCES = r"(?:(?:the|my|our|its|their)\s+)?(?:training\s+)?(?:sequences|documents|samples|examples|texts|inputs)"
_GLUED = (r"(?:glued|concatenated|joined|stitched|packed|merged|chained|mashed|squashed|crammed|combined|bundled|"
          r"smushed|jammed)")  # fmt: skip
_GLUE = (r"(?:glu(?:e|ing|eing)|concatenat(?:e|ing)|join(?:ing)?|stitch(?:ing)?|merg(?:e|ing)|chain(?:ing)?|"
         r"mash(?:ing)?|cram(?:ming)?|combin(?:e|ing))")  # fmt: skip
_STREAM = (
    r"(?:\s+together)?(?:\s+(?:into|in|as)\s+(?:one|a|a single|long|big)\s+"
    r"(?:(?:long|big|continuous|single)\s+)?(?:stream|sequence|row|buffer|block|chunk|string|line)s?)?"
)
PACKING_DESCRIBED = (
    rf"\b{_SEQUENCES}\s+(?:(?:are|is|being|get|gets|getting|be|should|must|will|would|can|shall)\s+)*"
    rf"(not\s+|never\s+|(?:aren|isn|shouldn|mustn|won|wouldn|don|doesn)'?t\s+)?(?:(?:be|being|get)\s+)?{_GLUED}{_STREAM}|"
    rf"\b{_GLUE}\s+{_SEQUENCES}{_STREAM}"
)
# Packing off, described by its result: each document padded on its own, one sequence per row.
UNPACKED = (
    r"\bpad(?:ded|ding)?\s+(?:each|every)\s+(?:sequence|document|sample|example)\s+(?:separately|on its own|"
    r"individually|by itself)\b|\b(?:keep|keeping|kept)\s+(?:each|every|the)\s+(?:sequences?|documents?|samples?|"
    r"examples?)\s+(?:separate|apart|on (?:its|their) own)\b|\b(?:one|a single)\s+(?:sequence|document|sample|"
    r"example)\s+per\s+row\b"
)


# A negation before a description, in its clause: "without the documents being concatenated", "don't glue ...".
NEGATED_BEFORE = rf"\b(?:without|w/o|no|not|never|{NT}|disable|skip|avoid|stop)\b[^,;.]{{0,20}}$"


# Packing refused as the mixing of sequences: "no mixing", "without mixing the documents" (not a data mix: "no mixing
# of datasets", nor mixed precision: "no mixing precisions", "no mixing of fp8 in there", nor another sense: "no
# mixing up the configs"). Only a mixing said of nothing else, or of the sequences, ends its clause there.
MIXING_REFUSED = (r"\b(no|without|w/o)\s+mixing(?:\s+(?:of\s+)?(?:the\s+)?(?:sequences|documents|samples|examples))?\b"
                  r"(?=\s*(?:$|[,.;!?)\u2014-]|(?:please|and|but|this time|between|across)\b))"
                  )  # fmt: skip


def packing_in_words(text: str) -> str:
    """`text` with packing described in words written as "packing on" (or "packing off"), or as "packing" after a
    negation, which the switches then read."""
    text = re.sub(MIXING_REFUSED, r"\1 packing", text, flags=re.I)
    text = re.sub(PACKING_DESCRIBED, _packing, text, flags=re.I)
    return re.sub(UNPACKED, "packing off", text, flags=re.I)


def _packing(found: re.Match) -> str:
    if found.group(1):
        return "packing off"
    return "packing" if re.search(NEGATED_BEFORE, found.string[: found.start()], re.I) else "packing on"
