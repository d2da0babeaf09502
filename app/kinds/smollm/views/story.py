"""The real-model walkthrough's story: what each of its six steps teaches, and the figure that proves it
(templates/smollm/figures.html draws each focus), in the words of the walkthrough's own model
(views/model_facts.py: its name, its blocks, its heads)."""
from __future__ import annotations

from app.kinds.smollm.views.model_facts import SMOLLM2, ModelFacts
from app.views.story import StepStory


def stories_for(facts: ModelFacts) -> dict[str, StepStory]:
    """Each step's story for the model `facts` describes."""
    model = f"A real chat model, {facts.name}," if facts.named else "A real chat model"
    every_block = "both" if facts.n_layer == 2 else f"all {facts.n_layer}"
    beside = ("the embedding (tied to the output head) and the final norm are shown beside them"
              if facts.tie_embeddings else "the embedding, the output head (its own weights, not tied to the "
              "embedding) and the final norm are shown beside them")
    heads = f"each of the {facts.n_head} attention heads" if facts.n_head > 1 else "the attention head"
    return {
        "sample": StepStory(
            f"{model} answers one prompt G times; a rule scores each answer.",
            more="The answers are sampled with the model's own chat template at the given temperature, so they "
                 "differ; the rule pays parts (a right answer, a short one) that add up to the reward r.",
            focus="group-answers", step_fields=("prompt", "group_size", "temperature", "seed"),
            evidence="every answer's text, its length, and its reward's parts"),
        "advantages": StepStory(
            "Each answer's advantage is its reward against the group's mean, over the group's spread; every "
            "token of the answer gets it.",
            more="No value model: the other answers to the same prompt are the baseline. When all answers earn "
                 "the same, every advantage is 0 and this prompt teaches nothing this step.",
            focus="group-advantages", step_fields=("group_size",),
            evidence="the reward, mean, spread and advantage of every answer"),
        "ratio": StepStory(
            "Each token's ratio ρ shows how far the policy has moved from the sampler, and the clip stops a token's "
            "push (✂) once ρ leaves [1 − ε, 1 + ε] in its advantage's direction. At μ = 1, TRL's default, the "
            "recorded step is the policy's first update on this group: every ρ is 1 and nothing clips.",
            more="ρ = π_θ(token) / π_old(token); π_old is the checkpoint that wrote the answers. With μ > 1 the "
                 "policy takes μ − 1 AdamW steps on the group first, so the ratios leave 1; a larger learning rate "
                 "moves them further and the clip starts to bite.",
            focus="token-ratios", form_open=True, step_fields=("inner_steps", "learning_rate", "clip_epsilon"),
            evidence="ρ under every token of every answer, ✂ where the clip binds"),
        "blocks": StepStory(
            f"The loss's gradient reaches {every_block} blocks, but not evenly: the bars show where in the network "
            "this step pushes hardest.",
            more=f"Each bar is the L2 norm of ∂loss/∂W over every weight of one block; {beside}.",
            focus="block-gradients", evidence="one bar per block: ‖∂loss/∂W‖"),
        "attention": StepStory(
            f"Inside one block, {heads} spreads each token's attention over the prompt and "
            "the answer written so far.",
            more="Rows are the answer's tokens, columns the positions each one can see (the prompt, then the "
                 "answer); darker is more weight. Pick a head, an answer and a block below.",
            focus="attention-heads", step_fields=("attention_block",),
            evidence="the chosen head's weights for one answer, and each head's share on the prompt"),
        "update": StepStory(
            "The AdamW step on this loss moves the log-probabilities of the answers' tokens, mostly up where the "
            "advantage is positive and down where it is negative; the table counts the tokens that went the "
            "other way and says why.",
            more="The loss is the clipped surrogate plus β times the KL to the reference (the checkpoint); its "
                 "gradient is clipped to a norm of at most max_grad_norm, as TRL's trainer does, then AdamW steps. "
                 "The table lists the 10 tokens whose log π moved most.",
            focus="moved-tokens", step_fields=("learning_rate", "max_grad_norm"),
            evidence="the 10 most-moved tokens, before and after, which went against their advantage, and the "
                     "loss's two parts"),
    }


# SmolLM2's, for what reads the story without a walkthrough at hand (web/kind.py's featured sentence)
STORIES = stories_for(SMOLLM2)
