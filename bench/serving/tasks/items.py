"""The texts `bench.serving.tasks` sends: written here, so that a clone of the repository
(without ``../shared``) runs the benchmark.

* span QA: PubMed-like trial abstracts of about 420 word pieces (several windows of the
  shipped model's 128), each asked the question the model was trained on, with the
  drug, the condition and the population varied so that 32 requests are 32 different
  abstracts;
* tagging: a People's Daily-like news paragraph (one window), and a text three windows
  long;
* classification: Chinese product reviews, positive and negative, 32 of them.

Nothing here imports TensorFlow or torch.
"""

from __future__ import annotations

#: The question of the shipped PICO model's training items.
QUESTION = "Who were the participants of this study?"

_ABSTRACT = (
    "{drug_title} versus placebo for {condition} in {short}: a randomised, double-blind, "
    "placebo-controlled multicentre trial.\n\n"
    "BACKGROUND: {condition_cap} remains a frequent cause of hospital admission, disability "
    "and death, and the treatments that are currently recommended are often poorly tolerated "
    "by older patients with several chronic diseases. We therefore assessed the efficacy and "
    "safety of {drug} compared with placebo over one year of follow-up.\n"
    "METHODS: In this randomised, double-blind trial done at {sites} hospitals, we enrolled "
    "{population}. Participants were randomly assigned (1:1) by a central computer system "
    "with stratification by centre and baseline severity to receive oral {drug} {dose} or a "
    "matching placebo for 52 weeks, in addition to usual care. The primary outcome was the "
    "change from baseline in the disease-specific symptom score at week 24. Analysis was by "
    "intention to treat.\n"
    "RESULTS: Between March 2014 and June 2017, {n} patients were randomly assigned to "
    "{drug} ({n_drug}) or placebo ({n_placebo}). At week 24, the mean symptom score had "
    "improved by {gain} points in the {drug} group and by 4.1 points in the placebo group "
    "(adjusted difference {diff} points, 95% CI 1.2 to 6.8; p=0.004). Hospital admissions "
    "were less frequent with {drug} (rate ratio 0.78, 95% CI 0.61 to 0.99). Serious adverse "
    "events occurred in 18% of patients given {drug} and in 21% of those given placebo; "
    "nausea and dizziness were the most common reasons for stopping treatment.\n"
    "CONCLUSIONS: In {short}, {drug} improved symptoms and reduced hospital admissions "
    "without an excess of serious adverse events. Longer trials are needed to establish "
    "whether these benefits translate into lower mortality."
)
_DRUGS = (
    ("Colchicine", "colchicine", "0.5 mg twice daily"),
    ("Metformin", "metformin", "1000 mg twice daily"),
    ("Spironolactone", "spironolactone", "25 mg once daily"),
    ("Vitamin D3", "vitamin D3", "2000 IU once daily"),
    ("Dapagliflozin", "dapagliflozin", "10 mg once daily"),
    ("Low-dose aspirin", "low-dose aspirin", "100 mg once daily"),
    ("Melatonin", "melatonin", "3 mg at bedtime"),
    ("Allopurinol", "allopurinol", "300 mg once daily"),
)
_CONDITIONS = (
    "chronic heart failure",
    "chronic obstructive pulmonary disease",
    "knee osteoarthritis",
    "type 2 diabetes with peripheral neuropathy",
)
_POPULATIONS = (
    (
        "older adults",
        "adults aged 65 years or older with {condition} who had been admitted to hospital at "
        "least once in the previous year and had an estimated glomerular filtration rate of "
        "at least 30 mL/min",
    ),
    (
        "women after menopause",
        "postmenopausal women aged 50 to 80 years with a confirmed diagnosis of {condition} "
        "for at least two years and persistent symptoms despite stable standard treatment",
    ),
    (
        "nursing-home residents",
        "residents of nursing homes aged 70 years or older with {condition} and moderate "
        "frailty, who were able to walk ten metres with or without an aid",
    ),
    (
        "rural patients",
        "patients aged 40 to 75 years with {condition} attending rural primary care clinics, "
        "with a body-mass index between 20 and 40 and no history of cancer",
    ),
)


def qa_items(count: int) -> list[dict[str, str]]:
    """``count`` (question, context) requests, each a different abstract (up to 128)."""
    items = []
    for i in range(count):
        title, drug, dose = _DRUGS[i % len(_DRUGS)]
        condition = _CONDITIONS[(i // len(_DRUGS)) % len(_CONDITIONS)]
        short, population = _POPULATIONS[(i + i // len(_DRUGS)) % len(_POPULATIONS)]
        n = 240 + 37 * i
        context = _ABSTRACT.format(
            drug_title=title,
            drug=drug,
            dose=dose,
            condition=condition,
            condition_cap=condition[0].upper() + condition[1:],
            short=short,
            population=population.format(condition=condition),
            sites=12 + i % 9,
            n=n,
            n_drug=n // 2 + n % 2,
            n_placebo=n // 2,
            gain=f"{7.5 + 0.3 * (i % 7):.1f}",
            diff=f"{3.4 + 0.3 * (i % 7):.1f}",
        )
        items.append({"question": QUESTION, "context": context})
    return items


#: One window of the shipped tagger (126 characters and less).
NEWS_PARAGRAPH = (
    "新华社北京一月五日电 国务院总理李鹏今天上午在人民大会堂会见了日本外务大臣小渊惠三。"
    "李鹏说，中日两国是近邻，发展长期稳定的睦邻友好关系符合两国人民的根本利益。"
    "外交部部长钱其琛和中国驻日本大使徐敦信参加了会见。"
)
#: Three windows of the shipped tagger (253 to 378 characters).
NEWS_LONG = NEWS_PARAGRAPH + (
    "本报上海一月六日电 记者王伟报道：上海市人民政府今天召开新闻发布会，市长徐匡迪介绍了浦东新区"
    "去年的建设成就。据上海市统计局统计，浦东新区全年完成国内生产总值六百零八亿元，比上年增长百分之"
    "十八。徐匡迪说，上海将继续扩大对外开放，欢迎世界各地的企业家到浦东投资。新华社广州一月七日电 "
    "广东省省长卢瑞华在广州会见了香港特别行政区行政长官董建华一行。双方就粤港两地在基础设施、"
    "环境保护和科技教育等方面的合作交换了意见。中山大学校长黄达人和广东省外事办公室主任参加了会见。"
    "卢瑞华表示，广东愿与香港加强合作，共同促进珠江三角洲地区的繁荣和稳定。"
)

_REVIEW_PARTS = (
    ("这款手机", "电池很耐用，屏幕清晰，拍照效果也不错", 1),
    ("这本书", "内容空洞，印刷质量差，好几页都是模糊的", 0),
    ("这家酒店", "房间干净整洁，前台服务热情，早餐种类丰富", 1),
    ("这个电饭煲", "用了不到一个星期就坏了，客服也不理人", 0),
    ("这双运动鞋", "穿着很舒服，尺码标准，跑步时脚一点都不累", 1),
    ("这台笔记本电脑", "开机特别慢，风扇噪音很大，玩游戏还会死机", 0),
    ("这件羽绒服", "保暖效果很好，做工精细，颜色和图片一样", 1),
    ("这个耳机", "音质很差，戴久了耳朵疼，连接还经常断", 0),
)
_REVIEW_TAILS = (
    "",
    "物流很快，包装也很好。",
    "价格有点贵，不过总体来说还可以接受，以后可能还会再买，也会推荐给朋友。",
    "和商家描述的差不多，第二天就收到了，快递员态度也很好，给个评价吧。",
)


def reviews(count: int) -> list[str]:
    """``count`` short product reviews (about half positive), of varied lengths."""
    texts = []
    for i in range(count):
        subject, body, _ = _REVIEW_PARTS[i % len(_REVIEW_PARTS)]
        tail = _REVIEW_TAILS[(i // len(_REVIEW_PARTS) + i) % len(_REVIEW_TAILS)]
        texts.append(f"{subject}{body}。{tail}")
    return texts
