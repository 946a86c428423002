"""Visual-reference goal descriptions: the target plus a pointer to the reference image."""
from ...instructions.template_sets import register_templates, styled_templates

FORMAL = [
    "Proceed to {room} and locate {target} {rel} shown in the reference image.",
    "Navigate to the location in the reference image: {target} {rel}.",
    "The reference image shows your goal. Go to {target} in {room}.",
    "Locate {target} {rel} in {room}, as depicted in the image.",
    "Use the reference image to find {target} {rel}.",
    "Go to {room} and stop at the view shown in the image, facing {target}.",
    "Match the reference image: approach {target} {rel}.",
    "Your destination, shown in the image, is {target} in {room}.",
    "Find the spot in the image; it faces {target}.",
    "Navigate until your view matches the image of {target} {rel}.",
    "Proceed to {target}, shown in the reference image, and stop.",
]
NATURAL = [
    "Could you go to the place in this image? It's {target} {rel} in {room}.",
    "Please find {target} {rel}; the image shows what it looks like.",
    "Head to {room} and find the spot in the image, right by {target}.",
    "See the image? Go stand where it was taken, in front of {target}.",
    "Please go to {target} in {room}. The image should help.",
    "Can you find this view? It's {target} {rel}.",
    "Look for {target} {rel}. Here's an image of the goal.",
    "Go to the spot in the image, near {target} in {room}, please.",
    "Please walk over to {target}; the photo shows where to stop.",
    "Find the place from the image: {target} {rel}.",
    "Could you head to {room} and stop where this image was taken?",
]
CASUAL = [
    "go to where this image was taken, {target_noun} {rel}",
    "see the image? Find that {target_noun} in {room}",
    "this spot, {target_noun} {rel}. Go",
    "find that view, it's by {target} in {room}",
    "go match the image, {target} {rel}",
    "that {target_noun} in the image? Go there",
    "image is your goal, {target_noun} in {room}",
    "head to {room}, find {target} from the image",
    "yo, go find the view in the image, {target} {rel}",
    "check the image and go to {target}",
    "go stand where the image was taken, by {target}",
]

register_templates("visual_reference", styled_templates("visref", {"formal": FORMAL, "natural": NATURAL, "casual": CASUAL}))
