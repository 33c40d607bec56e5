"""Questions the abstain measurements share: which shared set is "the other one" in the same
language (its queries are unanswerable on this set's KB), and written off-topic questions for the
examples KB (embedded-engineering notes).

Used by the relevance stage (``notfound_rates.py``) and by the calibration tools
(``tools/abstain_model.py``, ``tools/calibrate_abstain.py``), so the fit and the measurement
ask the same questions.
"""

from __future__ import annotations

OTHER = {
    "cranfield": "agentset-msmarco",
    "agentset-msmarco": "cranfield",
    "cmrc2018-dev": "qbqtc-dev",
    "qbqtc-dev": "cmrc2018-dev",
}
#: Off-topic questions for the examples KB (embedded-engineering notes).
OFF_TOPIC = [
    "What is the capital of France?",
    "How do I configure a Kubernetes ingress controller?",
    "Who won the 2018 FIFA World Cup?",
    "What is the recommended dose of ibuprofen for adults?",
    "How long should I bake a sourdough loaf?",
    "Which sandbox backends are supported on macOS?",
    "How do I reset my Gmail password?",
    "What is the boiling point of ethanol?",
    "How do I train a Transformer language model on TPUs?",
    "What interest rate does a 30-year mortgage have today?",
    "Which PostgreSQL index type suits full-text search?",
    "How many moons does Jupiter have?",
    "乙醇的沸点是多少度？",
    "北京到上海的高铁要多长时间？",
    "如何配置 Nginx 反向代理的负载均衡？",
    "红烧肉怎么做才好吃？",
    "个人所得税的起征点是多少？",
    "Kubernetes 的 Pod 调度策略有哪些？",
    "如何申请美国签证？",
    "iPhone 的电池健康度怎么查看？",
]
