//! `catalogue`: the effective catalogue as YAML ready to copy, headed by the files it came
//! from as comments.

use super::Render;
use crate::core::catalogue::CatalogueView;

impl Render for CatalogueView {
    fn plain(&self) -> String {
        let mut text = String::from("# the effective catalogue, from these files in order:\n");
        for (i, file) in self.files.iter().enumerate() {
            let how = if i == 0 { "" } else { file.how.as_str() };
            text.push_str(&format!(
                "#   {}{}{how}\n",
                file.source,
                if how.is_empty() { "" } else { ": " }
            ));
        }
        text.push_str(
            "# copy it into a catalogue file to change it; a file with `extends: true` \
             overrides or adds entries instead\n",
        );
        text.push_str(&serde_yaml_ng::to_string(&self.catalogue).unwrap_or_default());
        text
    }
}
