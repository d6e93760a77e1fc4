"""Generate the course's small text corpus, src/transformer_course/data/corpus.txt.

The text is written by this script from templates and word lists of our own (no third-party
text, so no licence question). It is deterministic: the same seed gives the same bytes, and
tests/test_data.py checks that the shipped file equals a fresh run.

Mostly simple Simplified-Chinese sentences, about a fifth English. Phrases overlap on purpose
(我 / 非常 / 喜欢 / 非常喜欢 / 吃苹果 ...), so that a BPE tokenizer learns tokens that share parts,
and words are drawn with Zipf-like frequencies (the first of each list is the most common).

Usage: python tools/make_corpus.py
"""
from __future__ import annotations

import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "transformer_course" / "data" / "corpus.txt"
TARGET_BYTES = 150_000

SUBJECTS = ["我", "你", "他", "她", "我们", "你们", "他们", "小明", "小红", "老师", "学生们", "妈妈", "爸爸",
            "我的朋友", "这个孩子", "奶奶", "哥哥", "妹妹", "同学们", "邻居"]
DEGREES = ["非常", "很", "特别", "真的", "有点", "十分", "比较", "最"]
LIKES = ["喜欢", "爱", "想", "讨厌", "习惯"]
ACTIVITIES = ["吃苹果", "吃香蕉", "吃米饭", "吃面条", "吃饺子", "喝茶", "喝咖啡", "喝牛奶", "看书", "看电影",
              "听音乐", "唱歌", "跳舞", "跑步", "游泳", "画画", "写字", "学习数学", "学习中文", "学习英语",
              "打篮球", "踢足球", "种花", "做饭", "散步", "旅行", "下棋", "写日记", "骑自行车", "拍照片"]
TIMES = ["今天", "昨天", "明天", "每天早上", "周末", "晚上", "下午", "春天", "冬天", "去年", "现在", "放学以后"]
PLACES = ["在家里", "在学校", "在公园", "在图书馆", "在北京", "在上海", "在河边", "在山上", "在教室里", "在商店里",
          "在海边", "在操场上"]
WEATHER = ["天气很好", "下雨了", "风很大", "阳光很温暖", "天很冷", "外面很热", "下雪了", "天空很蓝"]
OPINIONS = {  # thing -> what one may think of it
    "这本书": ["很有意思", "有点无聊", "很重要"],
    "那部电影": ["很有意思", "有点无聊", "特别感人"],
    "这个苹果": ["非常好吃", "很新鲜", "很甜"],
    "这首歌": ["特别好听", "很好听", "有点吵"],
    "中文": ["很难", "很有意思", "很重要"],
    "数学": ["很难", "很简单", "很有意思"],
    "这个问题": ["很难", "很简单", "很重要"],
    "那家饭店": ["非常好吃", "很贵", "很安静"],
    "这座城市": ["很漂亮", "很大", "非常热闹"],
    "这个模型": ["很简单", "很重要", "很有意思"],
}
NUMBERS = ["一", "两", "三", "四", "五", "六", "七", "八", "九", "十"]
MODEL_FACTS = [
    "模型读到“{w}”的时候，会把注意力放在前面的词上。",
    "一个词的意思常常取决于它前后的词，比如“{w}”。",
    "注意力让每个位置都能看到句子里的其他位置。",
    "分词器会把常见的词合成一个符号，把少见的字拆成几个字节。",
    "“{w}”这个词在语料里出现得很多，所以它可能是一个单独的符号。",
]

EN_SUBJECTS = [  # subject, "like" and "be" agreeing with it
    ("I", "like", "am"), ("You", "like", "are"), ("She", "likes", "is"), ("He", "likes", "is"),
    ("We", "like", "are"), ("They", "like", "are"), ("My friend", "likes", "is"), ("The teacher", "likes", "is"),
]
EN_DEGREES = ["really", "also", "sometimes", "always", "never"]
EN_ACTIVITIES = ["to eat apples", "to read books", "to drink tea", "to listen to music", "to play football",
                 "to learn Chinese", "to draw pictures", "to go swimming", "to watch movies", "to cook dinner"]
EN_PLACES = ["park", "library", "school", "river", "market", "mountain", "beach", "museum"]
EN_DAYS = ["Monday", "Tuesday", "Saturday", "Sunday", "a rainy day", "a sunny morning"]
EN_THINGS = ["this book", "the new song", "that apple", "the model", "attention", "the weather"]
EN_ADJECTIVES = ["interesting", "sweet", "important", "simple", "strange", "beautiful"]


def zipf(rng: random.Random, words: list[str]) -> str:
    """A word drawn with Zipf-like frequencies, as in real text: the k-th word of the list has weight 1/k."""
    return rng.choices(words, weights=[1 / k for k in range(1, len(words) + 1)])[0]


def chinese_sentence(rng: random.Random) -> str:
    s, s2 = zipf(rng, SUBJECTS), zipf(rng, SUBJECTS)
    d, like, a, a2 = zipf(rng, DEGREES), zipf(rng, LIKES), zipf(rng, ACTIVITIES), zipf(rng, ACTIVITIES)
    t, p, n = rng.choice(TIMES), rng.choice(PLACES), rng.choice(NUMBERS)
    thing = rng.choice(list(OPINIONS))
    templates = [
        f"{s}{d}{like}{a}。",
        f"{t}{s}{p}{a}。",
        f"{s}{t}{p}{a}，{s2}也{a2}。",
        f"因为{rng.choice(WEATHER)}，所以{s}{p}{a}。",
        f"虽然{s}{d}{like}{a}，但是{s}更{like}{a2}。",
        f"{s}{like}{a}吗？",
        f"{s}说：“{s2}{d}{like}{a}。”",
        f"{s}不{like}{a}，{s}{like}{a2}。",
        f"我们一起去{p[1:]}{a}吧！",
        f"{s}每天{a}，已经{n}年了。",
        f"{s}觉得{thing}{rng.choice(OPINIONS[thing])}。",
        f"{t}{rng.choice(WEATHER)}，{s}想{p}{a}。",
        rng.choice(MODEL_FACTS).format(w=rng.choice([d + like, like + a, s + d + like])),
    ]
    return rng.choice(templates)


def english_sentence(rng: random.Random) -> str:
    (s, like, be), (s2, like2, _) = rng.choice(EN_SUBJECTS), rng.choice(EN_SUBJECTS)
    d, a = rng.choice(EN_DEGREES), rng.choice(EN_ACTIVITIES)
    templates = [
        f"{s} {d} {like} {a}.",
        f"On {rng.choice(EN_DAYS)}, {lower(s)} went to the {rng.choice(EN_PLACES)}.",
        f"{s} {be} sure that {rng.choice(EN_THINGS)} is {rng.choice(EN_ADJECTIVES)}.",
        f"Do you want {a}?",
        f"{s} {like} {a}, and {lower(s2)} {like2} it too.",
    ]
    return rng.choice(templates)


def lower(subject: str) -> str:
    """The subject in the middle of a sentence: "She" -> "she", but "I" stays."""
    return subject if subject == "I" else subject[0].lower() + subject[1:]


def make_corpus(seed: int = 0, target_bytes: int = TARGET_BYTES) -> str:
    """Paragraphs of 3 to 6 sentences, one per line, until the UTF-8 size reaches ``target_bytes``."""
    rng = random.Random(seed)
    lines, size = [], 0
    while size < target_bytes:
        if rng.random() < 0.2:
            line = " ".join(english_sentence(rng) for _ in range(rng.randint(3, 6)))
        else:
            line = "".join(chinese_sentence(rng) for _ in range(rng.randint(3, 6)))
        lines.append(line)
        size += len(line.encode("utf-8")) + 1
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(make_corpus(), encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
