"""Seeded synthetic prose, English and Chinese: a small hand-written grammar, no digits."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from operator import itemgetter
from random import Random

from needlescope.haystack._randomness import random_u16


def _words(text: str) -> list[str]:
    return text.split()


def _phrases(text: str) -> list[str]:
    return [p.strip() for p in text.split("|") if p.strip()]


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _capitalize(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:]


_EN_PEOPLE = _words("""
miller weaver baker clerk farmer sailor teacher widow traveller neighbour stranger doctor
shepherd carpenter fisherman innkeeper gardener merchant soldier student painter mason boatman
potter tailor cook nurse postman porter ferryman blacksmith cobbler grocer librarian watchman
musician singer poet beekeeper forester hunter lodger landlady governess coachman groom maid
butler bookseller chemist apprentice pedlar tinker shopkeeper schoolmaster vicar magistrate
surveyor engineer driver stationmaster harbourmaster dressmaker milliner laundress housekeeper
nephew niece cousin uncle aunt grandmother grandfather brother sister daughter son father mother
widower orphan pilgrim botanist astronomer clockmaker glassblower candlemaker saddler thatcher
cooper wheelwright ropemaker shepherdess lamplighter organist chimney-sweep gamekeeper
""")
_EN_PERSON_ADJECTIVES = _words("""
old young quiet tired patient careful cheerful elderly thin tall stout gentle stern kind shy
proud polite busy sleepy anxious solemn nervous clever weary honest modest curious thoughtful
restless friendly lonely humble cautious absent-minded good-natured soft-spoken grey-haired
broad-shouldered red-faced sunburnt barefoot talkative silent serious hopeful stubborn generous
earnest diligent forgetful wise sensible sturdy cautious freckled bearded long-legged
""")
_EN_PERSON_DETERMINERS = _words("the the the her his their our my that")
_EN_THINGS = _words("""
basket letter lantern kettle map coat blanket ladder bucket rope candle book parcel chair table
window door gate key clock hat scarf umbrella bottle jar cup bowl plate spoon knife hammer saw
shovel barrel sack crate trunk drawer shelf mirror curtain rug pillow quilt kite wheel net oar
sail anchor bell whistle violin drum flute painting photograph notebook envelope pencil pen
brush comb ribbon button needle thread loaf pie cake apple pear plum cabbage potato onion turnip
cheese teapot jug honeypot flowerpot stone brick tile chimney pump stove lamp bench wagon sled
bicycle compass telescope globe calendar newspaper magazine diary postcard stamp coin purse
wallet ring necklace brooch shawl glove boot shoe apron jacket sweater cap cloak birdcage
wheelbarrow watering-can fishing-rod walking-stick suitcase satchel handkerchief
""")
_EN_THING_ADJECTIVES = _words("""
wooden faded heavy small narrow worn old new broken painted polished cracked rusty dusty shiny
crooked sturdy fragile empty folded torn clean damp dry warm cold bright dark pale green blue
red yellow brown grey white black striped woollen leather copper brass iron silver tin glass
clay paper cotton linen velvet silk crumpled borrowed forgotten familiar ordinary peculiar
battered patched dented chipped sealed unopened tidy neat enormous tiny round square long
crumbling splendid plain simple elegant mended spare heavy-looking lopsided
""")
_EN_THING_DETERMINERS = _words("the the the her his their our that this")
_EN_VERBS = _phrases("""
carried | mended | opened | painted | folded | cleaned | polished | fixed | wrapped | packed |
unpacked | lifted | moved | pushed | pulled | dragged | washed | dried | hung up | fetched |
borrowed | returned | found | lost | dropped | picked up | put away | set down | examined |
studied | admired | ignored | weighed | measured | sorted | stacked | stored | hid | sold |
bought | repaired | replaced | sharpened | oiled | tied up | locked | unlocked | closed | filled |
emptied | sealed | tasted | shared | offered | delivered | posted | signed | described |
noticed | remembered | forgot | brought | sent | kept | left behind | watched | inspected |
tidied | arranged | straightened | dusted | brushed | covered | uncovered | tested | checked |
praised | mentioned | collected | gathered | held | wiped | patched | carried off | looked for |
looked at | pointed at | asked about | talked about | thought about | wrote about | dreamed about
""")
_EN_INTRANSITIVE = _phrases("""
waited | walked home | rested | hummed a tune | sat down | stood still | looked around |
smiled | laughed softly | sighed | fell asleep | woke early | listened | hesitated | nodded |
shrugged | went out | came back | stayed indoors | kept walking | turned away | said nothing |
thought for a while | wandered off | stopped to rest | knocked twice | called out | waved |
yawned | stretched | paused at the door | lingered | hurried along | strolled past | slept late |
worked late | read quietly | sang softly | whistled | coughed | listened closely |
leaned on the fence | looked out of the window | gazed at the sky | kept silent | agreed |
disagreed politely | changed the subject | went to bed early | made tea | lit the stove |
went for a walk | sat by the fire | wrote a long letter | tidied the kitchen | fed the hens |
swept the step | watered the garden | mended the fence | closed the shutters | set the table
""")
_EN_ADVERBS = _words("""
slowly quietly carefully gently patiently quickly briefly eagerly calmly cheerfully reluctantly
casually absently politely firmly neatly silently suddenly finally happily wearily thoughtfully
curiously softly steadily hastily lazily idly proudly shyly nervously cautiously deliberately
gladly warmly kindly sternly boldly openly simply nearly already once quietly promptly
""")
_EN_PREPOSITIONS = _phrases("""
near | beside | behind | past | by | not far from | at the edge of | on the far side of |
in front of | close to | opposite | just beyond | a little way from | around the corner from
""")
_EN_PLACES = _words("""
river mill market harbour orchard chapel square kitchen garden station bakery church school
library bridge road lane hill meadow field forest wood pond lake shore beach dock quay pier
farm barn stable cottage inn tavern shop courthouse well fountain gate wall tower lighthouse
village crossroads valley ridge cliff marsh hedge canal workshop warehouse granary greenhouse
vineyard pasture riverbank footpath schoolhouse post-office boathouse churchyard
""")
_EN_TIMES = _phrases("""
in the morning | in the afternoon | in the evening | at dawn | at dusk | at noon | before supper |
after supper | after breakfast | before breakfast | after the rain | before the rain |
during the storm | later that day | later that week | early the next morning | the following day |
that evening | that spring | that summer | that autumn | that winter | on a grey morning |
on a quiet afternoon | on the last warm day of the year | on market day |
at the end of the week | once the bells had rung | while the kettle boiled |
as the sun went down | as the light faded | before the frost | after the harvest |
during the fair | before anyone else was awake | long after midnight | around teatime |
in the middle of the night | on the first cold morning | when the snow came
""")
_EN_OPENERS = _phrases("""
Meanwhile, | As usual, | For a while, | In the end, | Later, | Still, | Of course, | Even so, |
After that, | Before long, | At first, | Eventually, | Somehow, | By then, | Afterwards, |
All the same, | In any case, | Now and then, | As it happened, | Sure enough, |
Not surprisingly, | For once, | Once more, | Quite suddenly, | Little by little, | As expected, |
Later on, | Naturally, | Perhaps, | That day,
""")
_EN_THINKING = _phrases("""
remembered that | noticed that | said that | thought that | heard that | suspected that |
believed that | mentioned that | explained that | wrote that | guessed that | admitted that |
insisted that | knew that | realised that | supposed that | told everyone that | doubted that
""")
_EN_WEATHER = _words("""
quiet cold warm bright still damp calm grey windy misty cloudy sunny pleasant peaceful dull
gloomy crisp mild chilly dusty muddy silent busy crowded empty lively drowsy fresh clear
""")
_EN_STATES = _phrases("""
cold | warm | clean | dusty | damp | heavy | full | empty | ready | missing | broken | open |
shut | locked | dry | wet | safe | untouched | forgotten | in its usual place |
where it always was | out of reach | too heavy to lift | still there | nowhere to be seen
""")

_EN_SLOTS: dict[str, list[str]] = {
    "Subj": [_capitalize(d) for d in ("the", "her", "his", "their", "our", "my", "that")],
    "subj": _EN_PERSON_DETERMINERS,
    "padj": [""] * 30 + _EN_PERSON_ADJECTIVES,
    "person": _EN_PEOPLE,
    "obj": _EN_THING_DETERMINERS,
    "tadj": [""] * 30 + _EN_THING_ADJECTIVES,
    "thing": _EN_THINGS,
    "verb": _EN_VERBS,
    "intr": _EN_INTRANSITIVE,
    "adv": _EN_ADVERBS,
    "prep": _EN_PREPOSITIONS,
    "place": _EN_PLACES,
    "time": _EN_TIMES,
    "Time": [_capitalize(t) for t in _EN_TIMES],
    "open": _EN_OPENERS,
    "think": _EN_THINKING,
    "weather": _EN_WEATHER,
    "state": _EN_STATES,
    "sep": [" "] * 7 + ["\n\n"],
}
# Macros expand to several independent slots; a trailing digit in the template asks for a second,
# independent draw ("{S2}" is another person than "{S}").
_EN_MACROS = {
    "S": "{Subj} {padj} {person}",
    "s": "{subj} {padj} {person}",
    "o": "{obj} {tadj} {thing}",
    "a": "{ind} {thing}",
    "T": "{Obj} {tadj} {thing}",
    "p": "{prep} the {place}",
}
_EN_TEMPLATES = [
    "{S} {verb} {o} {p}.",
    "{S} {adv} {verb} {o} {time}.",
    "{open} {s} {verb} {o} and {verb2} {o2}.",
    "{Time}, {s} {intr} {p}.",
    "{S} {think} {s2} {verb} {o} {time}.",
    "{T} was {state} {time}, so {s} {intr}.",
    "{S} {intr}, and {s2} {adv} {verb} {o}.",
    "{S} {verb} {o} while {s2} {intr}.",
    "{open} nobody {verb} {o} {p}.",
    "{S} {adv} {intr} {p}.",
    "There was {a} {p}, and {s} {adv} {verb} it.",
    "{Time}, {s} {verb} {o} {p}.",
    "It was {weather} {p} {time}.",
    "{S} asked {s2} about {o}.",
    "{S} {verb} {o}, then {verb2} {o2} {adv}.",
    "Had anyone seen {o} {p}?",
    "How {weather} it was {p}!",
    "{open} {s} {adv} {intr}.",
    "{T} stood {p} {time}.",
    "{S} {intr}; {s2} {intr2}.",
    "Nobody knew why {s} {verb} {o} {time}.",
    "{S} said nothing about {o}, but {s2} {intr}.",
    "Was it {s} who {verb} {o}?",
    "{S} and {s2} {verb} {o} {p} {time}.",
    "{Time}, the weather was {weather}, and {s} {intr}.",
    "{S} kept {a} {p}.",
    "{open} {o} was {state}.",
]

_ZH_PEOPLE = _phrases("""
磨坊主|织工|面包师|书记员|农夫|水手|教书先生|寡妇|旅人|邻居|陌生人|医生|牧羊人|木匠|渔夫|店主|园丁|
商人|老兵|学生|画匠|石匠|船夫|陶工|裁缝|厨子|护士|邮差|脚夫|摆渡人|铁匠|鞋匠|杂货店老板|图书管理员|
更夫|乐师|歌手|诗人|养蜂人|护林员|猎人|房客|女房东|家庭教师|车夫|马夫|女仆|管家|书商|药剂师|学徒|
货郎|补锅匠|私塾先生|县官|测量员|工程师|司机|列车员|站长|守塔人|港务长|女裁缝|洗衣妇|表哥|表妹|
舅舅|姑妈|奶奶|爷爷|哥哥|姐姐|女儿|儿子|父亲|母亲|朝圣者|植物学家|钟表匠|蜡烛匠|马鞍匠|箍桶匠|
绳匠|茶馆老板|说书人|账房先生|挑水的小伙子|卖花的姑娘|看门人|老掌柜
""")
_ZH_PERSON_ADJECTIVES = _phrases("""
年老的|年轻的|安静的|疲惫的|耐心的|细心的|爱笑的|隔壁的|村里的|镇上的|新来的|瘦高的|矮胖的|
温和的|严肃的|害羞的|和气的|忙碌的|困倦的|沉默的|聪明的|老实的|好奇的|心事重重的|热心的|孤单的|
谨慎的|健忘的|勤快的|固执的|慷慨的|头发花白的|晒得黝黑的|穿着旧外套的|话不多的|走路很慢的|
住在河边的|刚从城里回来的|脾气很好的|戴着草帽的
""")
_ZH_PERSON_DETERMINERS = _phrases("那位|这位|她的|他的|我们的|")
_ZH_THINGS = _phrases("""
篮子|信|灯笼|水壶|地图|外套|毯子|梯子|水桶|绳子|蜡烛|书|包裹|椅子|桌子|窗户|钥匙|钟|帽子|围巾|
雨伞|瓶子|罐子|茶杯|碗|盘子|勺子|小刀|锤子|锯子|铁锹|木桶|麻袋|箱子|抽屉|书架|镜子|窗帘|地毯|
枕头|被子|风筝|轮子|渔网|船桨|船帆|铃铛|口哨|胡琴|鼓|笛子|画|照片|笔记本|信封|铅笔|毛笔|梳子|
丝带|扣子|针线|面包|馅饼|蛋糕|苹果|梨|李子|白菜|土豆|洋葱|萝卜|馒头|豆腐|茶叶|蜂蜜|果酱|面粉|
木柴|石头|砖头|瓦片|油灯|长凳|马车|雪橇|自行车|指南针|望远镜|地球仪|日历|报纸|杂志|日记|明信片|
邮票|铜钱|钱包|戒指|项链|披肩|手套|靴子|布鞋|围裙|夹克|毛衣|斗篷|算盘|砚台|扇子|灯罩|竹篮|草帽|
鸟笼|手推车|喷壶|钓竿|手杖|皮箱|书包|手帕
""")
_ZH_THING_ADJECTIVES = _phrases("""
木头做的|褪色的|沉重的|小小的|窄窄的|旧旧的|新买的|破了的|刷过漆的|擦亮的|有裂纹的|生锈的|
落满灰的|亮闪闪的|歪歪扭扭的|结实的|易碎的|空空的|装满了的|叠好的|撕破的|干净的|潮湿的|干燥的|
暖和的|冰凉的|鲜艳的|暗淡的|淡绿色的|蓝色的|红色的|黄色的|棕色的|灰色的|白色的|黑色的|带条纹的|
羊毛的|皮革的|铜制的|铁制的|玻璃的|陶土的|纸做的|棉布的|麻布的|丝绸的|皱巴巴的|借来的|被遗忘的|
熟悉的|普通的|奇怪的|补过的|磕坏了的|封好的|没拆开的|整整齐齐的|巨大的|圆圆的|方方正正的|
长长的|朴素的|精致的
""")
_ZH_THING_DETERMINERS = _phrases("那些|这些|她的|他的|我们的|")
_ZH_VERBS = _phrases("""
修好了|打开了|擦干净了|折好了|放下了|收起了|找到了|带走了|送来了|搬走了|拿起了|挂起了|洗干净了|
晾干了|包好了|捆好了|整理好了|检查了|看了看|摸了摸|借走了|还回了|买下了|卖掉了|藏起了|翻出了|
擦亮了|修补了|摆好了|收拾好了|背起了|抱起了|端来了|推开了|盖上了|掀开了|翻看了|清点了|称了称|
量了量|分好了|叠起了|堆好了|换掉了|系上了|解开了|锁上了|装满了|倒空了|尝了尝|烤好了|煮好了|
切好了|寄出了|写好了|读完了|带回了|留下了|重新摆放了|仔细端详了|提起了|谈起了|想起了|找了找|
掸了掸|晒了晒|补好了|拆开了
""")
_ZH_INTRANSITIVE = _phrases("""
回家去了|坐下来休息了|站着没动|四处看了看|笑了笑|叹了口气|睡着了|很早就醒了|静静地听着|
犹豫了一下|点了点头|耸了耸肩|出门去了|又回来了|待在屋里|继续往前走|转过身去|什么也没说|
想了一会儿|慢慢走远了|停下来歇脚|敲了敲门|喊了一声|挥了挥手|打了个哈欠|伸了个懒腰|
在门口停了停|多待了一会儿|匆匆走过|慢悠悠地走过去|睡到很晚|忙到很晚|安静地看书|轻声唱歌|
吹起了口哨|靠在篱笆上|望着窗外|抬头看天|沉默不语|表示同意|客气地表示反对|换了个话题|
早早上床睡觉|泡了一壶茶|生起了炉子|收拾起东西|慢慢喝着茶|低头想心事|去河边散步|坐在炉火旁|
写了一封长信|打扫了厨房|喂了鸡|扫了台阶|给菜园浇了水|修了修篱笆|关上了百叶窗|摆好了碗筷
""")
_ZH_ADVERBS = _phrases("""
慢慢地|悄悄地|仔细地|认真地|轻轻地|耐心地|匆匆地|高兴地|平静地|小心翼翼地|不紧不慢地|默默地|
随手|顺便|终于|忽然|照例|好不容易|费力地|熟练地|笨拙地|若无其事地|漫不经心地|心满意足地|
一声不响地|有条不紊地|犹犹豫豫地|兴冲冲地|懒洋洋地|稳稳地|偷偷地|郑重地|认认真真地|利落地|
轻手轻脚地|不声不响地|自顾自地|从从容容地
""")
_ZH_PLACES = _phrases("""
河边|磨坊旁边|集市上|果园里|小教堂门口|广场上|厨房里|花园里|车站旁边|面包店门口|学校后面|
图书馆里|桥头|大路边|小巷里|山坡上|草地上|田埂上|树林边上|池塘边|湖边|岸边|码头上|农场里|
谷仓里|马厩旁边|小屋门前|客栈里|酒馆门口|铺子里|邮局门口|镇公所前面|水井旁边|喷泉边|城门口|
院墙下|塔楼下面|灯塔附近|村口|岔路口|山谷里|山脊上|悬崖边|沼泽边|篱笆旁|运河边|作坊里|
仓库里|粮仓旁边|温室里|葡萄园里|牧场上|河堤上|小路尽头|老槐树下|石桥上|屋檐下|菜园里|晒谷场上
""")
_ZH_TIMES = _phrases("""
清晨|一大早|上午|中午|午后|傍晚|黄昏时分|天黑以后|晚饭前|晚饭后|早饭后|雨停之后|下雨之前|
暴风雨中|那天晚些时候|那个星期晚些时候|次日清晨|第二天|那天晚上|那年春天|那年夏天|那年秋天|
那年冬天|一个阴沉的早晨|一个安静的下午|赶集那天|周末|钟声响过以后|水壶烧开的时候|
太阳落山的时候|天色渐暗的时候|下霜以前|秋收以后|庙会期间|大家还没醒的时候|半夜里|
喝午茶的时候|深夜|头一场雪落下的时候
""")
_ZH_OPENERS = _phrases("""
后来，|与此同时，|照例，|过了一阵，|最后，|不过，|当然，|即便如此，|在那之后，|没过多久，|起初，|
终于，|不知怎么的，|那时，|事后，|无论如何，|时不时地，|碰巧，|果然，|难得地，|又一次，|突然，|
渐渐地，|不出所料，|说来也怪，|那天，|据说，
""")
_ZH_THINKING = _phrases("记得|发现|听说|注意到|想起|觉得|猜想|相信|提到|说起|怀疑|知道|承认|坚持说")
_ZH_WEATHER = _phrases("""
安静|冷清|明亮|潮湿|凉爽|暖和|平静|阴沉|晴朗|热闹|空旷|寂静|清冷|闷热|干燥|泥泞|舒服|昏暗|清新|拥挤
""")
_ZH_DEGREES = _phrases("很|有些|格外|十分|非常|有点儿|相当|特别")

_ZH_SLOTS: dict[str, list[str]] = {
    "pdet": [""] * 4 + _ZH_PERSON_DETERMINERS,
    "padj": [""] * 20 + _ZH_PERSON_ADJECTIVES,
    "person": _ZH_PEOPLE,
    "tdet": [""] * 8 + _ZH_THING_DETERMINERS,
    "tadj": [""] * 20 + _ZH_THING_ADJECTIVES,
    "thing": _ZH_THINGS,
    "verb": _ZH_VERBS,
    "intr": _ZH_INTRANSITIVE,
    "adv": _ZH_ADVERBS,
    "place": _ZH_PLACES,
    "time": _ZH_TIMES,
    "open": _ZH_OPENERS,
    "think": _ZH_THINKING,
    "weather": _ZH_WEATHER,
    "deg": _ZH_DEGREES,
    "sep": [""] * 6 + ["\n\n"],
}
_ZH_MACROS = {"S": "{pdet}{padj}{person}", "o": "{tdet}{tadj}{thing}"}
_ZH_TEMPLATES = [
    "{S}{time}在{place}{verb}{o}。",
    "{open}{S}{adv}{verb}{o}，又{verb2}{o2}。",
    "{time}，{S}在{place}{intr}。",
    "{S}{think}{S2}{time}{verb}{o}。",
    "{o}{time}还放在{place}，{S}{intr}。",
    "{S}{intr}，{S2}{adv}{verb}{o}。",
    "{S}{verb}{o}的时候，{S2}{intr}。",
    "{place}{deg}{weather}，{S}{adv}{intr}。",
    "{S}问{S2}有没有见过{o}。",
    "{S}{verb}{o}，然后{adv}{verb2}{o2}。",
    "有人在{place}见过{o}吗？",
    "{place}多么{weather}啊！",
    "{S}{intr}；{S2}{intr2}。",
    "谁也不知道{S}为什么{time}{verb}{o}。",
    "{S}和{S2}{time}一起在{place}{verb}{o}。",
    "{time}，天气{deg}{weather}，{S}{intr}。",
    "{open}{S}{adv}{intr}。",
    "{o}{time}放在{place}，没有人动过。",
    "{open}{place}{deg}{weather}。",
    "{S}{time}{adv}{intr}；{place}{deg}{weather}。",
]


class _Grammar:
    """Templates compiled to positional format strings, with one 65,536-entry pool per slot.

    Pools of exactly 2**16 entries let a block draw every slot with C-level calls
    (random bytes -> indices -> itemgetter), which is what makes prose fast.
    """

    def __init__(
        self, slots: dict[str, list[str]], macros: dict[str, str], templates: Sequence[str]
    ) -> None:
        self._slot_names: list[str] = []
        self._pools: list[list[str]] = []
        compiled = [self._compile(t + "{sep}", slots, macros) for t in templates]
        self._templates = _tile(compiled)

    def _compile(self, template: str, slots: dict[str, list[str]], macros: dict[str, str]) -> str:
        def expand(match: re.Match[str]) -> str:
            name, copy = match.group(1), match.group(2)
            if name not in macros:
                return match.group(0)
            return re.sub(r"\{(\w+)\}", lambda m: "{" + m.group(1) + copy + "}", macros[name])

        def position(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in self._slot_names:
                self._slot_names.append(key)
                self._pools.append(_tile(slots[key.rstrip("0123456789")]))
            return "{" + str(self._slot_names.index(key)) + "}"

        expanded = re.sub(r"\{([A-Za-z]+)(\d?)\}", expand, template)
        return re.sub(r"\{(\w+)\}", position, expanded)

    def block(self, rng: Random, sentences: int) -> str:
        templates = itemgetter(*random_u16(rng, sentences))(self._templates)
        columns = [itemgetter(*random_u16(rng, sentences))(pool) for pool in self._pools]
        # An empty optional slot (no adjective) leaves a double space behind.
        return "".join(map(str.format, templates, *columns)).replace("  ", " ")


def _tile(words: Sequence[str]) -> list[str]:
    return (list(words) * (65536 // len(words) + 1))[:65536]


def _en_grammar() -> _Grammar:
    slots = dict(_EN_SLOTS)
    slots["ind"] = [f"{_article(a)} {a}" for a in _EN_THING_ADJECTIVES]
    slots["Obj"] = [_capitalize(d) for d in _EN_THING_DETERMINERS]
    return _Grammar(slots, _EN_MACROS, _EN_TEMPLATES)


_GRAMMARS: dict[str, Callable[[], _Grammar]] = {
    "en": _en_grammar,
    "zh": lambda: _Grammar(_ZH_SLOTS, _ZH_MACROS, _ZH_TEMPLATES),
}
_GRAMMAR_CACHE: dict[str, _Grammar] = {}


def grammar(language: str) -> _Grammar:
    """The language's grammar, compiled once per process."""
    if language not in _GRAMMAR_CACHE:
        _GRAMMAR_CACHE[language] = _GRAMMARS[language]()
    return _GRAMMAR_CACHE[language]


LANGUAGES = tuple(_GRAMMARS)
