"""multigrain."""
import warnings as _warnings

__version__ = "0.1.0"

# pydantic's notes on mlflow 3.17's models ('Field "model_name" in PromptModelConfig has conflict with protected
# namespace'; pydantic 2.9 prints them, newer ones do not): a library's note to its authors, four lines on every
# import of mlflow by a command, a benchmark or a test of ours
_warnings.filterwarnings("ignore", message='Field "model_', category=UserWarning, module="pydantic")
