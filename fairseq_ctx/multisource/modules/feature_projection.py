"""Dense auxiliary input (e.g. ResNet regions) projected to the model dimension (Libovický, 2019, ch. 5)."""
from fairseq.modules import FairseqDropout, LayerNorm
from torch import Tensor, nn


class FeatureProjection(nn.Module):
    """(B, R, d) features → (R, B, D) encoder states: linear projection to D (thesis §5.2),
    optional layer norm, optional learned region positions, dropout."""

    def __init__(self, feature_dim: int, regions: int, embed_dim: int, layer_norm: bool, dropout: float,
                 region_positions: bool):
        super().__init__()
        self.proj = nn.Linear(feature_dim, embed_dim)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        self.layer_norm = LayerNorm(embed_dim) if layer_norm else None
        self.region_positions = nn.Embedding(regions, embed_dim) if region_positions and regions > 1 else None
        if self.region_positions is not None:
            nn.init.normal_(self.region_positions.weight, std=embed_dim ** -0.5)
        self.dropout_module = FairseqDropout(dropout, module_name=self.__class__.__name__)

    def forward(self, features: Tensor) -> Tensor:
        x = self.proj(features.to(self.proj.weight.dtype))
        if self.region_positions is not None:
            x = x + self.region_positions.weight[: x.size(1)].unsqueeze(0)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return self.dropout_module(x).transpose(0, 1)
