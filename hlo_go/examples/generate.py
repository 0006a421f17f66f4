"""Regenerates the bundled example modules: ``python -m hlo_go.examples.generate``.

``cnn_train_step.hlo``: the optimized HLO (``jax.jit(step).lower(...).compile().as_text()``)
of one training step (forward, backward, SGD update) of a small convolutional
network in plain JAX, on this host's CPU backend.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp

HERE = Path(__file__).resolve().parent


def _cnn_loss(params: dict[str, jax.Array], images: jax.Array, labels: jax.Array) -> jax.Array:
    x = images
    for i in range(2):
        x = jax.lax.conv_general_dilated(
            x, params[f"conv{i}"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        x = jax.nn.relu(x)
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = x.reshape(x.shape[0], -1)
    logits = x @ params["dense"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))


def _cnn_step(params: dict[str, jax.Array], images: jax.Array, labels: jax.Array) -> tuple:
    loss, grads = jax.value_and_grad(_cnn_loss)(params, images, labels)
    new_params = jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)
    return new_params, loss


def cnn_train_step_hlo() -> str:
    """Optimized HLO text of the example CNN training step."""
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {
        "conv0": jax.random.normal(k1, (3, 3, 3, 16)) * 0.1,
        "conv1": jax.random.normal(k2, (3, 3, 16, 32)) * 0.1,
        "dense": jax.random.normal(k3, (8 * 8 * 32, 10)) * 0.01,
    }
    images = jnp.zeros((8, 32, 32, 3))
    labels = jnp.zeros((8, 10))
    return jax.jit(_cnn_step).lower(params, images, labels).compile().as_text()


def main() -> None:
    path = HERE / "cnn_train_step.hlo"
    path.write_text(cnn_train_step_hlo())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
