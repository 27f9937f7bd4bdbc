//! The spending limits set outside the catalogue: the environment's
//! (`ADVISORD_BUDGET_*`) and the project file's `budget:`.

use super::*;

/// The budgets the environment sets (`ADVISORD_BUDGET_*`), or a usage error naming the
/// variable and what it accepts.
pub fn env_budgets(vars: &BTreeMap<String, String>) -> Result<Budgets, Error> {
    let amount = |name: &str, text: &str| -> Result<f64, Error> {
        match text.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(Error::Usage(format!(
                "`{name}` is `{}`; give a plain amount of 0 or more in the catalogue's \
                 currency, such as `5` or `2.50` (no unit or currency sign)",
                text.escape_default()
            ))),
        }
    };
    let mut budgets = Budgets::default();
    for (name, text) in vars {
        match name.as_str() {
            ENV_BUDGET_DAY => budgets.total.per_day = Some(amount(name, text)?),
            ENV_BUDGET_TASK => budgets.total.per_task = Some(amount(name, text)?),
            ENV_BUDGET_ADVISORS_DAY | ENV_BUDGET_ADVISORS_TASK => {
                for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                    let Some((id, value)) = item.split_once('=') else {
                        return Err(Error::Usage(format!(
                            "`{name}`: `{}` is not `ADVISOR=AMOUNT`; write e.g. \
                             `my-advisor=2.50,other=1`",
                            item.escape_default()
                        )));
                    };
                    let limits = budgets.advisors.entry(id.trim().to_string()).or_default();
                    let value = Some(amount(name, value)?);
                    if name == ENV_BUDGET_ADVISORS_DAY {
                        limits.per_day = value;
                    } else {
                        limits.per_task = value;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(budgets)
}

/// The `budget:` of the project's `.advisord/project.yaml`, if the file exists.
pub(super) fn project_budgets_of(root: &Path) -> Result<Budgets, Error> {
    let path = root.join(crate::check::PROJECT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Budgets::default()),
        Err(e) => {
            return Err(Error::Usage(format!(
                "cannot read `{}`: {e}; fix its permissions or remove it",
                path.display()
            )))
        }
    };
    project_budgets(&text, &path.display().to_string()).map_err(Error::Catalogue)
}
