"""Chapter 13 (设计哲学与总复习): the course review as a self-test.

The review replaces coding exercises: twelve multiple-choice questions, one per common mistake of
the course, in three parts. Every wrong option is a typical
misconception and carries its own feedback. The learner answers a part with a function returning
``{question number: letter}``; ``check_review_1`` … ``check_review_3`` print one Chinese line.
``quiz_widget`` is the clickable version for a running kernel. ``tests/test_ch13_review.py`` proves
that every wrong option is answered with its own feedback.

``EXERCISES`` is empty: these are not tensor-valued coding exercises, so the generic checker tests
of ``tests/test_exercises.py`` do not apply to them.
"""
from __future__ import annotations

from typing import Any

from .quiz import LETTERS, Question, Review, plain
from .quiz import quiz_widget as _quiz_widget


def _q(number: int, stem: str, options: list[tuple[str, str, str]], source: str) -> Question:
    """Build a question from ``(letter, option text, note)`` triples; the right one's letter ends in ``*``."""
    answer = next(letter.rstrip("*") for letter, _, _ in options if letter.endswith("*"))
    by_letter = {letter.rstrip("*"): (text, note) for letter, text, note in options}
    return Question(
        number=number,
        stem=stem,
        options=tuple(by_letter[k][0] for k in LETTERS),  # type: ignore[arg-type]
        answer=answer,
        notes={k: by_letter[k][1] for k in LETTERS},
        source=source,
    )


QUESTIONS: tuple[Question, ...] = (
    _q(1, "自注意力里的 Q、K、V 是怎么得到的？", [
        ("A", "模型为词表里的每个 token 存了一组 Q、K、V 向量，用的时候查表取出",
         "模型存的是投影矩阵 $W_Q, W_K, W_V$（规则），不是每个 token 的 Q/K/V（结果）；"
         "同一个 token 在不同位置、不同上下文里得到不同的 Q/K/V。"),
        ("B", "Q 由当前 token 投影得到，K 和 V 直接使用其他 token 的 embedding",
         "K 和 V 也各有自己的投影矩阵；不投影，模型就无法学习「拿什么当索引」「交出什么内容」。"),
        ("C*", "同一个输入 $X$ 分别乘三个独立训练的矩阵：$Q=XW_Q$，$K=XW_K$，$V=XW_V$",
         "三者来自同一个 $X$，这就是「自」注意力的「自」；"
         "三个矩阵独立，模型才有自由度学习提问、索引、内容三种不同的角度。"),
        ("D", "用一个共享矩阵 $W$ 算出 $XW$，再把它同时当作 Q、K、V",
         "那样分数矩阵是对称的，「i 找 j」和「j 找 i」一样强，每个 token 最像的往往是自己；"
         "第 3 章的实验里，共享一个矩阵的模型明显不如三个独立矩阵。"),
    ], "第 3 章"),
    _q(2, r"缩放点积注意力为什么要把分数除以 $\sqrt{d_k}$？", [
        ("A*", r"点积是 $d_k$ 项之和、方差约为 $d_k$：不缩放时 softmax 饱和成 one-hot，"
               r"梯度中的 $p(1-p)$ 趋于 0；缩放把方差拉回 1",
         "要说出完整的链条：$d_k$ 大 → 点积方差大 → softmax 饱和成 one-hot → 梯度趋于 0 → 训不起来。"
         "只说「归一化一下」是不够的。"),
        ("B", "为了让每一行注意力权重之和等于 1，成为一个合法的概率分布",
         "归一化是 softmax 的工作：不除以 $\\sqrt{d_k}$，每行权重之和也是 1。缩放解决的是分布过尖的问题。"),
        ("C", "为了减少计算量：分数变小之后，softmax 和后面的矩阵乘法都算得更快",
         "除法不会减少计算，反而多了一步；它解决的是数值分布和梯度的问题。"),
        ("D", "为了防止溢出：$d_k$ 大时分数太大，$e^x$ 会算出 inf，softmax 得到 NaN",
         "softmax 的实现会先减去每行的最大值，溢出不是问题；真正的问题是饱和后的梯度消失。"),
    ], "第 4 章"),
    _q(3, "把上下文从 4K 扩到 32K（长度 ×8），一层自注意力里分数矩阵 $QK^\\top$ 的计算量大约变成原来的几倍？", [
        ("A", "8 倍：和 RNN 一样，与长度成正比",
         "每个 query 都要和每个 key 打分，分数矩阵有 $N^2$ 个元素：长度 ×8，计算量 ×64。"
         "与长度成正比的是 KV cache 和线性层。"),
        ("B*", "64 倍",
         "分数矩阵有 $N^2$ 个元素，$8^2=64$（第 3 章与第 12 章都用 FlopCounterMode 数过）。"
         "这个 $O(N^2)$ 是所有长上下文优化要对付的根源。"),
        ("C", "不变：所有位置并行计算，所以没有额外代价",
         "并行只是让计算同时进行，计算总量一点没少；并行和 $O(N^2)$ 是同一个设计的两面。"),
        ("D", r"约 $\sqrt 8\approx 2.8$ 倍，因为分数除以了 $\sqrt{d_k}$",
         "$\\sqrt{d_k}$ 只缩放数值，与序列长度无关，也不改变要算多少个分数。"),
    ], "第 3、12 章"),
    _q(4, "一个 $d_{\\text{model}}=512$ 的注意力层，从 1 个头改成 8 个头（每头 $d_k=64$）。哪种说法对？", [
        ("A", "参数量变成 8 倍，因为每个头都有一套完整的投影矩阵",
         "每个头的投影只有 $d_{\\text{model}}\\times d_k$，8 个头拼起来正好是 "
         "$d_{\\text{model}}\\times d_{\\text{model}}$：总参数量与单头相同。"),
        ("B", "8 个头算的是同一种注意力，只是多算几遍再求平均，结果更稳定",
         "多头不是重复计算：每个头投影到不同的子空间，能学到不同类型的关联（相邻、主谓、指代……），再由 $W_O$ 融合。"),
        ("C", "参数量变成 1/8，因为每个头只有 64 维",
         "每个头变窄了，但头数变多了，两者正好抵消。"),
        ("D*", "参数量不变；每个头在自己的 64 维子空间里计算注意力，可以学到不同类型的关联",
         "$d_k=d_{\\text{model}}/H$ 让总参数量与单头持平：多头换来的是「多种关系并行建模」，不是简单堆算力。"),
    ], "第 5 章"),
    _q(5, "去掉位置编码，把输入从「我 打 你」换成「你 打 我」。不带掩码的自注意力层的输出会怎样？", [
        ("A", "完全不变：三个位置的输出向量和原来一模一样，连顺序都不变",
         "输出会跟着重排（原来位置 1 的输出现在出现在位置 3），并不是原样不变；不过两句话在模型眼里确实只差一个排列。"),
        ("B*", "跟着重排：每个 token 得到的输出向量和原来相同，只是换了位置（置换等变），模型分不出谁打谁",
         "注意力只按内容相似度加权，不看先后，所以对顺序不敏感；语言是顺序敏感的，于是必须显式注入位置信息。"),
        ("C", "变成完全不同的向量：softmax 会自动考虑 token 的先后顺序",
         "softmax 只对分数做归一化，而分数只由内容决定；先后顺序在这个计算里根本不存在。"),
        ("D", "会报错：没有位置编码，注意力无法确定每个 token 在哪里，计算无法进行",
         "注意力照样能算，只是对顺序视而不见——正因为它不报错，忘了位置编码才危险。"),
    ], "第 6 章"),
    _q(6, "在 GPT-2 small 的一个 Transformer block 里，FFN 的参数大约占多少？它起什么作用？", [
        ("A", "约 10%；它只是给注意力的输出加一个激活函数，几乎没有参数",
         "FFN 有两个 $d_{\\text{model}}\\times 4d_{\\text{model}}$ 的大矩阵，"
         "是 block 里参数最多的部分，远不止一个激活函数。"),
        ("B", "约 1/3；它和注意力一样负责 token 之间的信息交换，两者平分参数",
         "FFN 对每个位置独立计算，token 之间不交换任何信息；交换信息是注意力的工作。"),
        ("C*", "约 2/3；它对每个位置独立做非线性变换，研究表明它储存了大量事实知识",
         "注意力层约 $4d^2$ 个参数，FFN 约 $8d^2$，占 2/3。"
         "注意力本质上是线性加权，FFN 提供非线性，常被称为模型的「记忆仓库」。"),
        ("D", "0：FFN 只是一个激活函数（如 GELU），没有可训练的参数",
         "FFN 是「升维 → 非线性 → 降维」的两层全连接网络，两个矩阵都是可训练参数。"),
    ], "第 7 章"),
    _q(7, "关于三种架构的现状，哪种说法最准确？", [
        ("A*", "生成类大模型几乎都是 decoder-only；检索、分类、embedding 和 reranker 仍大量用 encoder-only，"
               "翻译、摘要也仍有 encoder-decoder",
         "正确的表述是「在通用生成场景 decoder-only 胜出」（目标统一、自监督效率高、规模化后能力涌现），"
         "而不是另外两种消失了。"),
        ("B", "encoder-only（BERT 一类）已经被淘汰：它不能生成文本，在大模型时代没有位置",
         "RAG 里的 embedding 模型和 reranker 大量是 encoder 架构，在理解类任务上又快又好。"),
        ("C", "decoder-only 在所有任务上都严格更好，检索和分类用它也一样，另外两种只剩历史意义",
         "decoder-only 胜在通用生成与规模化；在检索、分类等理解任务上，同样大小的 encoder 往往更高效。"),
        ("D", "encoder-decoder 是最新的架构，它结合了两者的优点，正在取代 decoder-only",
         "恰恰相反：encoder-decoder 是 2017 年原始 Transformer 的形态，decoder-only 是后来在通用生成上胜出的那一支。"),
    ], "第 9 章"),
    _q(8, "把一个 48 层 Transformer 的残差连接全部去掉（其余不变），最可能发生什么？", [
        ("A", "计算更快，效果基本不变：残差只是加速收敛的小技巧",
         "残差连接几乎不占计算，它的作用是让信号和梯度能穿过深层网络，而不是加速。"),
        ("B", "参数量大幅减少：每个残差连接都带一个投影矩阵，去掉就省下了",
         "残差连接只是一次加法，没有任何参数。"),
        ("C", "模型学到更深的抽象：信息不能再抄近路，必须逐层变换",
         "没有直通的路，信号和梯度要穿过 48 次变换，往往在到达之前就已消失或失控，模型反而学不到东西。"),
        ("D*", "很难训练：梯度要穿过每一层的变换，容易消失或爆炸，深层的信息也会逐层退化",
         "残差给信号和梯度一条直通的路，LayerNorm 稳住数值分布；"
         "两者都不是 Transformer 的发明，却是它能堆到几十上百层的前提。"),
    ], "第 8 章"),
    _q(9, "在序列 [我, 喜欢, 我] 上做推理时，KV cache 里存的是什么？", [
        ("A", "每个 token id 一份 K/V：两个「我」共用一份，节省显存",
         "缓存按位置存，不按 token id：两个「我」位置不同、看到的上文不同，在每一层的 K/V 都不同。"),
        ("B*", "每一层、每个头、每个位置各一份 K 和 V：两个「我」各有一份，而且互不相同",
         "缓存的是 token 实例，不是 token 类型；历史位置的 K/V 一旦算出就不再改变，所以才能缓存。"),
        ("C", "只有最后一层的 K/V，因为只有最后一层决定输出",
         "每一层的注意力都要读取所有历史位置在 **这一层** 的 K/V，所以每层都得缓存。"),
        ("D", "每个位置的 Q、K、V 三者",
         "历史位置的 Q 以后再也用不到：新 token 只用自己的 Q 去查历史的 K 和 V。"),
    ], "第 10、11 章"),
    _q(10, "一个模型的上下文窗口是 128K 个 token，prompt 已经占了 120K。模型最多还能生成多少个 token？", [
        ("A", "128K：窗口只限制输入，输出另有额度",
         "输出不另算：生成的 token 会接到序列末尾、写进 KV cache，和 prompt 的 token 占同一份容量。"),
        ("B", "120K：输出不能比输入长",
         "输出长度与输入长度没有这种关系；限制的是两者之和。"),
        ("C*", "8K",
         "输入和输出共用一个窗口：$T_{\\text{prompt}}+T_{\\text{generated}}\\le W$。"),
        ("D", "不受限制：有了 KV cache 就不需要再看历史",
         "KV cache 只是免去重算，历史的 K/V 仍要存、仍要被注意力读取，它本身就占着窗口的容量。"),
    ], "第 12 章"),
    _q(11, "模型对外公布的上下文窗口，最准确的描述是？", [
        ("A", "只由显存决定：显存越大，窗口越大，与模型本身无关",
         "显存只是三道闸门之一：GPT-2 的窗口卡在 1024 行位置表上，显存再多也没用。"),
        ("B", "只由位置编码决定：用了 RoPE 就可以任意长",
         "RoPE 在任何长度都能算，但不加处理就外推，质量会明显下降；超过训练长度的部分没有质量保证。"),
        ("C", "位置极限、训练长度、显存上限三者中最大的那个",
         "三道闸门是串联的，任何一道关上，窗口就到头了：取最小值，不是最大值。"),
        ("D*", "min(位置编码的极限, 训练长度, 显存上限)，是综合三者之后的承诺值",
         "三道闸门串联，取最小；同一个模型在不同硬件、不同并发下能用的窗口可以差好几倍。"),
    ], "第 12 章"),
    _q(12, "按本书的观点，Transformer 表现出的「推理能力」从哪里来？", [
        ("A*", "函数空间（结构能表示什么）、优化可达性（训练能否找到）"
               "与数据分布（数据里有什么模式）三层叠加后的整体行为",
         "没有哪个模块「负责推理」。第 13 章的小实验里，"
         "复制行为同样离不开三层：位置信息（函数空间）、平台期之后的突然下降（优化）、训练数据里的周期（数据）。"),
        ("B", "某个专门负责推理的模块：例如 FFN 存着推理规则，或某个特定的注意力头负责逻辑推导",
         "模型里没有显式的推理模块；头与 FFN 的分工都是训练中自发形成的，而且常有冗余。"),
        ("C", "结构本身：Transformer 是从第一性原理推导出的最优结构，推理能力由结构保证",
         "Transformer 是在可微、表达、工程、实验四重约束下演化出来的，许多解释是事后合理化；"
         "结构只划定了「能表示什么」，并不保证学成什么。"),
        ("D", "规模本身：只要参数足够多，推理能力就必然出现，与训练数据无关",
         "能力离不开数据：第 13 章的模型只学会了训练数据里的那个周期，换一个周期就失败。"),
    ], "第 13 章"),
)

REVIEWS = (
    Review("自测 1 注意力本身", QUESTIONS[0:4]),
    Review("自测 2 组件与架构", QUESTIONS[4:8]),
    Review("自测 3 推理、上下文与设计", QUESTIONS[8:12]),
)
REVIEW_1, REVIEW_2, REVIEW_3 = REVIEWS
check_review_1 = REVIEW_1.check
check_review_2 = REVIEW_2.check
check_review_3 = REVIEW_3.check

EXERCISES: tuple = ()  # the review replaces coding exercises in this chapter (see the module docstring)


def quiz_widget(questions: tuple[Question, ...] = QUESTIONS) -> Any:
    """Clickable self-test for a running kernel: one row of A–D buttons per question, feedback on click."""
    return _quiz_widget(questions)


__all__ = ["LETTERS", "QUESTIONS", "REVIEWS", "Question", "Review", "plain", "check_review_1", "check_review_2",
           "check_review_3", "quiz_widget", "EXERCISES"]
